'use strict';
// The gRPC compat driver for the RocketMQ 5.x Node.js client (rocketmq-client-nodejs 1.0.8).
// Same protocol as java/GrpcDriver.java (see compat_tests/grpc5_harness.py): a JSON case file in,
// JSON lines out, "stop" on stdin ends a consumer, a hard deadline exits with code 3.

const fs = require('fs');
const readline = require('readline');
const {
  Producer, SimpleConsumer, PushConsumer, FilterExpression, ConsumeResult,
} = require('rocketmq-client-nodejs');
// the client takes these enums from its generated protocol code
const { FilterType, TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const c = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ ...fields, event, t: Date.now() / 1000 }) + '\n');
}

function errorOf(e) {
  const out = { error: `${e && e.name}: ${e && e.message}` };
  if (e && typeof e.code === 'number') out.code = e.code;
  else {
    const m = /response-code=(\d+)/.exec(String(e && e.message));
    if (m) out.code = Number(m[1]);
  }
  return out;
}

let stopLine = false;
const stopWaiters = [];
let stopAny = false;
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', line => {
  if (line.trim() === 'stop') {
    stopLine = true;
    stopAny = true;
    stopWaiters.splice(0).forEach(f => f());
  }
});
rl.on('close', () => {
  stopAny = true;
  stopWaiters.splice(0).forEach(f => f());
});
const sleep = ms => new Promise(r => setTimeout(r, ms));
const waitStop = () => new Promise(r => (stopAny ? r() : stopWaiters.push(r)));

const deadline = (c.deadline_s || 60) * 1000;
setTimeout(() => {
  emit('timeout', { after_s: deadline / 1000 });
  process.exit(3);
}, deadline).unref();

function options() {
  const o = {
    endpoints: c.endpoints,
    namespace: '',
    sslEnabled: !!c.tls,
    requestTimeout: (c.request_timeout_s || 3) * 1000,
  };
  if (c.access_key) o.sessionCredentials = { accessKey: c.access_key, accessSecret: c.secret_key };
  return o;
}

function filter() {
  return new FilterExpression(c.expression || '*', c.expression_type === 'SQL92' ? FilterType.SQL : FilterType.TAG);
}

function view(m) {
  const props = {};
  for (const [k, v] of m.properties) props[k] = v;
  const body = Buffer.from(m.body);
  const v = {
    body_len: body.length, msgId: m.messageId, topic: m.topic, keys: m.keys || [],
    props, deliveryAttempt: m.deliveryAttempt, bornHost: m.bornHost,
  };
  // a multi-MiB JSON line helps nobody: its length and digest
  if (body.length <= 64 * 1024) v.body_b64 = body.toString('base64');
  else v.body_sha256 = require('crypto').createHash('sha256').update(body).digest('hex');
  if (m.tag !== undefined && m.tag !== null) v.tag = m.tag;
  if (m.messageGroup) v.messageGroup = m.messageGroup;
  if (m.deliveryTimestamp) v.deliveryTimestamp = m.deliveryTimestamp.getTime();
  if (m.bornTimestamp) v.bornTimestamp = m.bornTimestamp.getTime();
  return v;
}

function message(spec) {
  const m = { topic: c.topic, body: Buffer.from(spec.body_b64, 'base64') };
  if (spec.tag !== undefined) m.tag = spec.tag;
  if (spec.keys) m.keys = spec.keys;
  if (spec.group) m.messageGroup = spec.group;
  if (spec.delay_ms !== undefined) m.deliveryTimestamp = new Date(Date.now() + spec.delay_ms);
  if (spec.props) m.properties = new Map(Object.entries(spec.props));
  return m;
}

async function produce() {
  const threads = c.threads || 1;
  const defaultAnswer = c.check || 'commit';
  const byBody = new Map(c.messages.filter(m => m.check).map(m => [m.body_b64, m.check]));
  const producers = [];
  try {
    for (let t = 0; t < threads; t++) {
      const o = { ...options(), topics: [c.topic] };
      if (c.mode === 'transaction') {
        o.checker = {
          async check(mv) {
            const v = view(mv);
            const answer = byBody.get(v.body_b64) || defaultAnswer;
            emit('check', { ...v, answer });
            return answer === 'commit' ? TransactionResolution.COMMIT
              : answer === 'rollback' ? TransactionResolution.ROLLBACK : TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED;
          },
        };
      }
      const p = new Producer(o);
      await p.startup();
      producers.push(p);
    }
  } catch (e) {
    emit('start_error', errorOf(e));
    emit('done');
    return;
  }
  emit('started');
  await Promise.all(producers.map(async (producer, thread) => {
    const pending = [];
    for (let i = 0; i < c.messages.length; i++) {
      const spec = c.messages[i];
      const owner = spec.thread !== undefined ? spec.thread : i % threads;
      if (owner !== thread) continue;
      const sent = r => emit('sent', { index: i, thread, msgId: r.messageId });
      const failed = e => emit('send_error', { index: i, ...errorOf(e) });
      try {
        if (c.mode === 'async') {
          pending.push(producer.send(message(spec)).then(sent, failed));
        } else if (c.mode === 'transaction') {
          const tx = producer.beginTransaction();
          sent(await producer.send(message(spec), tx));
          const what = spec.tx || 'commit';
          if (what === 'commit') await tx.commit();
          else if (what === 'rollback') await tx.rollback();
        } else {
          sent(await producer.send(message(spec)));
        }
      } catch (e) {
        failed(e);
      }
    }
    await Promise.all(pending);
  }));
  if (c.check_wait_s) {
    const until = Date.now() + c.check_wait_s * 1000;
    while (!stopLine && Date.now() < until) await sleep(100);
  }
  for (const p of producers) await p.shutdown();
  emit('done');
}

async function simple() {
  let consumer;
  try {
    consumer = new SimpleConsumer({
      ...options(), consumerGroup: c.group, awaitDuration: (c.await_s || 5) * 1000,
      subscriptions: new Map([[c.topic, filter()]]),
    });
    await consumer.startup();
  } catch (e) {
    emit('start_error', errorOf(e));
    emit('done');
    return;
  }
  emit('started');
  const ack = c.ack || 'all';
  const expect = c.expect === undefined ? Infinity : c.expect;
  const started = Date.now();
  const minMs = (c.min_s || 0) * 1000;
  const runMs = (c.run_s || ((c.deadline_s || 60) - 5)) * 1000;
  let got = 0;
  while ((got < expect || Date.now() - started < minMs) && !stopLine && Date.now() - started < runMs) {
    let views;
    if (got === 0) emit('polling');
    try {
      views = await consumer.receive(c.max_count || 16, (c.invisible_s || 15) * 1000);
    } catch (e) {
      const err = errorOf(e);
      emit('receive_error', err);
      if (err.code !== 40401) await sleep(200);
      continue;
    }
    for (const m of views) {
      got++;
      emit('message', view(m));
      try {
        if (ack.startsWith('change:') && m.deliveryAttempt === 1) {
          await consumer.changeInvisibleDuration(m, Number(ack.slice(7)) * 1000);
          emit('changed', { msgId: m.messageId });
        } else if (ack === 'half' ? got % 2 === 1 : ack === 'all' || ack.startsWith('change:')
          || (ack.startsWith('after:') && m.deliveryAttempt >= Number(ack.slice(6)))) {
          await consumer.ack(m);
          emit('ack', { msgId: m.messageId });
        }
      } catch (e) {
        emit('ack_error', { msgId: m.messageId, ...errorOf(e) });
      }
    }
  }
  await consumer.shutdown();
  emit('done');
}

async function push() {
  const failTimes = c.fail_times || 0;
  let consumer;
  try {
    consumer = new PushConsumer({
      ...options(), consumerGroup: c.group, subscriptions: new Map([[c.topic, filter()]]),
      messageListener: {
        async consume(m) {
          const fail = (m.deliveryAttempt || 1) <= failTimes;
          emit('message', { ...view(m), result: fail ? 'FAILURE' : 'SUCCESS' });
          return fail ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
        },
      },
    });
    await consumer.startup();
  } catch (e) {
    emit('start_error', errorOf(e));
    emit('done');
    return;
  }
  emit('started');
  await waitStop();
  await consumer.shutdown();
  emit('done');
}

const roles = { produce, simple, push };
(roles[c.role] || (async () => { throw new Error(`unknown role ${c.role}`); }))()
  .catch(e => emit('driver_error', errorOf(e)))
  // stdout to a pipe is asynchronous: exit only once every line (a 4 MiB body's too) is written
  .finally(() => process.stdout.write('', () => process.exit(0)));
