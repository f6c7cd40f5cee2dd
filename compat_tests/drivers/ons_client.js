#!/usr/bin/env node
'use strict';
/*
 * Driver for the Node RocketMQ client ali-ons (npm), mirroring drivers/cpp_client.py:
 *   node ons_client.js CASE.json
 * CASE.json: {"role": "produce" | "push", "namesrv", "topic", "group", "deadline_s", ...}
 * stdout: JSON lines {"event": ...}; stdin: "stop" (or EOF) ends a push consumer.
 * Exit code 0 = ran to the end, 3 = deadline hit, 2 = driver error.
 *
 * ali-ons has no oneway, batch, pull-consumer, orderly or transactional API; those cases are
 * skipped by the tests, not emulated here.
 */

const fs = require('fs');
const path = require('path');
const readline = require('readline');

const ons = require(path.join(__dirname, '..', 'node_modules', 'ali-ons'));

const { Producer, Consumer, Message } = ons;

const SYSTEM_PROPERTIES = new Set([
  'KEYS', 'TAGS', 'WAIT', 'DELAY', 'RETRY_TOPIC', 'REAL_TOPIC', 'REAL_QID', 'TRAN_MSG', 'PGROUP',
  'MIN_OFFSET', 'MAX_OFFSET', 'BUYER_ID', 'ORIGIN_MESSAGE_ID', 'TRANSFER_FLAG', 'CORRECTION_FLAG',
  'MQ2_FLAG', 'RECONSUME_TIME', 'MSG_REGION', 'TRACE_ON', 'UNIQ_KEY', 'MAX_RECONSUME_TIMES',
  'CONSUME_START_TIME', 'CLUSTER', 'TRAN_PREPARED_QUEUE_OFFSET', 'TRANSACTION_CHECK_TIMES',
  'CHECK_IMMUNITY_TIME_IN_SECONDS', 'INSTANCE_ID', 'SHARDING_KEY',
]);

function emit(event, fields) {
  const line = Object.assign({ event, t: Date.now() / 1000 }, fields || {});
  process.stdout.write(JSON.stringify(line) + '\n');
}

function exitSoon(code) {
  // let stdout drain before leaving
  process.stdout.write('', () => process.exit(code));
}

// The client logs to stderr only; stdout stays JSON lines.
const logger = {
  info() {},
  debug() {},
  warn(...args) { console.error('[warn]', ...args); },
  error(...args) { console.error('[error]', ...args); },
};

// Only used for the name-server address URL lookup, which a fixed nameSrv never does.
const noHttp = {
  async request() { throw new Error('no http: nameSrv is fixed'); },
};

function baseOptions(c) {
  return {
    nameSrv: c.namesrv,
    httpclient: noHttp,
    logger,
    accessKeyId: '',
    accessKeySecret: '',
  };
}

function describe(msg) {
  const props = {};
  for (const [ k, v ] of Object.entries(msg.properties || {})) {
    if (v !== null && v !== undefined) props[k] = String(v);
  }
  const user = {};
  for (const [ k, v ] of Object.entries(props)) {
    if (!SYSTEM_PROPERTIES.has(k)) user[k] = v;
  }
  return {
    topic: msg.topic,
    tags: msg.tags || '',
    keys: msg.keys || '',
    body_b64: Buffer.from(msg.body || Buffer.alloc(0)).toString('base64'),
    msgId: msg.msgId,
    uniqKey: props.UNIQ_KEY || null,
    queueId: msg.queueId,
    queueOffset: msg.queueOffset,
    commitLogOffset: msg.commitLogOffset,
    reconsumeTimes: msg.reconsumeTimes,
    storeSize: msg.storeSize,
    bornTimestamp: msg.bornTimestamp,
    storeTimestamp: msg.storeTimestamp,
    storeHost: msg.storeHost,
    flag: msg.flag,
    sysFlag: msg.sysFlag,
    properties: props,
    userProperties: user,
  };
}

function buildMessage(topic, spec) {
  const body = Buffer.from(spec.body_b64 || '', 'base64');
  const msg = new Message(topic, spec.tags || null, body);
  if (!spec.tags) delete msg.properties.TAGS;
  if (spec.keys) msg.keys = spec.keys.split(' ');
  for (const [ k, v ] of Object.entries(spec.props || {})) msg.properties[k] = v;
  if (spec.delay_level) msg.delayTimeLevel = spec.delay_level;
  if (spec.flag) msg.flag = spec.flag;
  return msg;
}

async function primeTopic(producer, topic) {
  // ali-ons' send() gives up on the name server's TOPIC_NOT_EXIST before its TBW102 fallback:
  // do what its fallback would (route of the default topic -> publish info for the new topic).
  try {
    await producer._mqClient.getTopicRouteInfoFromNameServer(topic, 3000);
    emit('route', { topic, exists: true });
  } catch (err) {
    if (err.code !== 17) throw err; // only TOPIC_NOT_EXIST takes the TBW102 path
    emit('route', { topic, exists: false, error: String(err.message || err) });
    await producer._mqClient.updateTopicRouteInfoFromNameServer(topic, true, producer);
    emit('primed', { topic, via: producer.createTopicKey });
  }
}

async function runProduce(c) {
  const producer = new Producer(Object.assign(baseOptions(c), {
    producerGroup: c.group,
    sendMsgTimeout: c.send_timeout_ms || 3000,
  }));
  producer.on('error', err => console.error('[producer error]', err && err.message));
  await producer.ready();
  emit('started');
  if (c.prime_tbw102 !== false) await primeTopic(producer, c.topic);
  const mode = c.mode || 'sync';
  const specs = c.messages || [];
  const sendOne = async (spec, i) => {
    try {
      const r = await producer.send(buildMessage(c.topic, spec));
      emit('sent', {
        index: i, status: r.sendStatus, msgId: r.msgId, queueOffset: r.queueOffset,
        queueId: r.messageQueue && r.messageQueue.queueId,
      });
    } catch (err) {
      emit('send_error', { index: i, error: String(err && err.message || err) });
    }
  };
  if (mode === 'sync') {
    for (let i = 0; i < specs.length; i++) await sendOne(specs[i], i);
  } else if (mode === 'async') {
    await Promise.all(specs.map((s, i) => sendOne(s, i)));
  } else {
    throw new Error(`ali-ons has no ${mode} send API`);
  }
  await producer.close();
  emit('done');
}

async function runPush(c) {
  const options = Object.assign(baseOptions(c), {
    consumerGroup: c.group,
    isBroadcast: c.model === 'broadcasting',
  });
  if (c.consume_from) options.consumeFromWhere = c.consume_from;
  if (c.instance) options.instanceName = c.instance;
  const consumer = new Consumer(options);
  consumer.on('error', err => console.error('[consumer error]', err && err.message));
  let received = 0;
  let stopResolve;
  const stopped = new Promise(resolve => { stopResolve = resolve; });
  let expression = c.expression && c.expression !== '*' ? c.expression : '*';
  if (c.expression_type && c.expression_type !== 'TAG') {
    expression = { expressionType: c.expression_type, subString: c.expression };
  }
  const failPrefix = c.fail_prefix_b64 ? Buffer.from(c.fail_prefix_b64, 'base64') : null;
  const failTimes = c.fail_times || 1;
  const failures = new Map();
  consumer.subscribe(c.topic, expression, async msg => {
    const body = Buffer.from(msg.body || Buffer.alloc(0));
    let retry = false;
    if (failPrefix && body.subarray(0, failPrefix.length).equals(failPrefix)) {
      const key = body.toString('base64');
      const n = failures.get(key) || 0;
      if (n < failTimes) {
        failures.set(key, n + 1);
        retry = true;
      }
    }
    emit('message', Object.assign({ acked: !retry }, describe(msg)));
    received++;
    if (retry) return Consumer.ACTION_RETRY;
    if (c.stop_after && received >= c.stop_after) setTimeout(stopResolve, (c.linger_s || 0) * 1000);
  });
  await consumer.ready();
  emit('started');
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', line => { if (line.trim() === 'stop') stopResolve(); });
  rl.on('close', () => stopResolve());
  await stopped;
  emit('stopping', { received });
  await consumer.close();
  emit('done', { received });
}

async function main() {
  const c = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const deadline = setTimeout(() => {
    emit('timeout', { after_s: c.deadline_s || 60 });
    exitSoon(3);
  }, (c.deadline_s || 60) * 1000);
  deadline.unref();
  const roles = { produce: runProduce, push: runPush };
  if (!roles[c.role]) throw new Error(`unknown role ${c.role}`);
  await roles[c.role](c);
  exitSoon(0);
}

main().catch(err => {
  emit('driver_error', { error: String(err && err.message || err), tb: String(err && err.stack) });
  exitSoon(2);
});
