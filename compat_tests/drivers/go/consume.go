package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// systemProperties are the ones the client or broker add on their own (as in cpp_client.py).
var systemProperties = map[string]bool{}

func init() {
	for _, k := range []string{
		"KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
		"MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
		"MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
		"CONSUME_START_TIME", "CLUSTER", "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
		"CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "SHARDING_KEY",
	} {
		systemProperties[k] = true
	}
}

// describe: everything the Go client tells about a received message.
func describe(m *primitive.MessageExt) map[string]any {
	props := map[string]string{}
	user := map[string]string{}
	for k, v := range m.GetProperties() {
		props[k] = v
		if !systemProperties[k] {
			user[k] = v
		}
	}
	queueID := -1
	if m.Queue != nil {
		queueID = m.Queue.QueueId
	}
	return map[string]any{
		"topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(), "body_b64": b64(m.Body),
		"msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId, "uniqKey": props[primitive.PropertyUniqueClientMessageIdKeyIndex],
		"queueId": queueID, "queueOffset": m.QueueOffset, "commitLogOffset": m.CommitLogOffset,
		"reconsumeTimes": m.ReconsumeTimes, "storeSize": m.StoreSize, "bornTimestamp": m.BornTimestamp,
		"storeTimestamp": m.StoreTimestamp, "bornHost": m.BornHost, "storeHost": m.StoreHost,
		"flag": m.Flag, "sysFlag": m.SysFlag, "properties": props, "userProperties": user,
	}
}

func selector(c *Case) consumer.MessageSelector {
	expr := c.Expression
	if expr == "" {
		expr = "*"
	}
	if c.ExprType != "" && c.ExprType != "TAG" {
		return consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}
	}
	return consumer.MessageSelector{Type: consumer.TAG, Expression: expr}
}

func consumeFrom(name string) (consumer.ConsumeFromWhere, error) {
	switch name {
	case "", "CONSUME_FROM_LAST_OFFSET", "last":
		return consumer.ConsumeFromLastOffset, nil
	case "CONSUME_FROM_FIRST_OFFSET", "first":
		return consumer.ConsumeFromFirstOffset, nil
	case "CONSUME_FROM_TIMESTAMP", "timestamp":
		return consumer.ConsumeFromTimestamp, nil
	}
	return 0, fmt.Errorf("unknown consume_from %q", name)
}

func consumerOptions(c *Case) []consumer.Option {
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.Namesrv})),
		consumer.WithGroupName(c.Group),
		consumer.WithInstance(instanceName(c)),
	}
	if cred, ok := credentials(c); ok {
		opts = append(opts, consumer.WithCredentials(cred))
	}
	if c.Tls {
		opts = append(opts, consumer.WithTls(true))
	}
	return opts
}

func runPush(c *Case) error {
	stop, eof := watchStdin()
	opts := consumerOptions(c)
	if c.Model == "broadcasting" {
		opts = append(opts, consumer.WithConsumerModel(consumer.BroadCasting))
	} else {
		opts = append(opts, consumer.WithConsumerModel(consumer.Clustering))
	}
	if c.Orderly {
		opts = append(opts, consumer.WithConsumerOrder(true))
	}
	if c.ThreadCount > 0 {
		opts = append(opts, consumer.WithConsumeGoroutineNums(c.ThreadCount))
	}
	if c.MaxReconsume != nil {
		opts = append(opts, consumer.WithMaxReconsumeTimes(*c.MaxReconsume))
	}
	from, err := consumeFrom(c.ConsumeFrom)
	if err != nil {
		return err
	}
	opts = append(opts, consumer.WithConsumeFromWhere(from))
	var failPrefix []byte
	if c.FailPrefixB64 != "" {
		if failPrefix, err = unb64(c.FailPrefixB64); err != nil {
			return fmt.Errorf("fail_prefix_b64: %w", err)
		}
	}
	failTimes := 1
	if c.FailTimes != nil {
		failTimes = *c.FailTimes
	}
	pc, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		return fmt.Errorf("NewPushConsumer: %w", err)
	}
	var mu sync.Mutex
	received := 0
	failures := map[string]int{}
	stopOnce := sync.Once{}
	stopAfter := make(chan struct{})
	handler := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		result := consumer.ConsumeSuccess
		for _, m := range msgs {
			if failPrefix != nil && bytes.HasPrefix(m.Body, failPrefix) {
				mu.Lock()
				if n := failures[string(m.Body)]; n < failTimes {
					failures[string(m.Body)] = n + 1
					if c.Orderly {
						result = consumer.SuspendCurrentQueueAMoment
					} else {
						result = consumer.ConsumeRetryLater
					}
				}
				mu.Unlock()
			}
		}
		for _, m := range msgs {
			f := describe(m)
			f["acked"] = result == consumer.ConsumeSuccess
			emit("message", f)
		}
		mu.Lock()
		received += len(msgs)
		if c.StopAfter > 0 && received >= c.StopAfter {
			stopOnce.Do(func() {
				time.AfterFunc(time.Duration(c.LingerS*float64(time.Second)), func() { close(stopAfter) })
			})
		}
		mu.Unlock()
		return result, nil
	}
	if err := pc.Subscribe(c.Topic, selector(c), handler); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := pc.Start(); err != nil {
		return fmt.Errorf("push consumer start: %w", err)
	}
	emit("started", nil)
	select {
	case <-stop:
	case <-eof:
	case <-stopAfter:
	}
	mu.Lock()
	n := received
	mu.Unlock()
	emit("stopping", map[string]any{"received": n})
	if err := pc.Shutdown(); err != nil {
		emit("shutdown_error", map[string]any{"error": errText(err)})
	}
	mu.Lock()
	n = received
	mu.Unlock()
	emit("done", map[string]any{"received": n})
	return nil
}

func pullStatus(s primitive.PullStatus) string {
	switch s {
	case primitive.PullFound:
		return "FOUND"
	case primitive.PullNoNewMsg:
		return "NO_NEW_MSG"
	case primitive.PullNoMsgMatched:
		return "NO_MATCHED_MSG"
	case primitive.PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	case primitive.PullBrokerTimeout:
		return "BROKER_TIMEOUT"
	}
	return fmt.Sprintf("STATUS_%d", s)
}

// runPull reads every queue of the topic with the Go pull consumer's PullFrom, like the C++
// driver's DefaultMQPullConsumer:
// start="stored": each queue begins at the offset the broker stored for the group (the client's
// remote offset store -> QUERY_CONSUMER_OFFSET; -1 -> 0); "zero": at 0. After reading up to
// `limit` messages in total, if `commit`, the next offsets go to the broker through the client's
// offset store (UpdateOffset + PersistOffset -> UPDATE_CONSUMER_OFFSET).
func runPull(c *Case) error {
	opts := append(consumerOptions(c), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	pc, err := consumer.NewPullConsumer(opts...)
	if err != nil {
		return fmt.Errorf("NewPullConsumer: %w", err)
	}
	sel := selector(c)
	if err := pc.Subscribe(c.Topic, sel); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	wait := 10.0
	if c.QueueWaitS != nil {
		wait = *c.QueueWaitS
	}
	if err := pc.Start(); err != nil {
		emit("pull_error", map[string]any{"error": "start: " + errText(err)})
		emit("done", map[string]any{"received": 0})
		return nil
	}
	emit("started", nil)
	var queues []*primitive.MessageQueue
	until := time.Now().Add(time.Duration(wait * float64(time.Second)))
	for {
		queues, err = pc.GetTopicRouteInfo(c.Topic)
		if err == nil && len(queues) > 0 {
			break
		}
		if time.Now().After(until) {
			emit("pull_error", map[string]any{"error": fmt.Sprintf("GetTopicRouteInfo: %v (%d queues)", err, len(queues))})
			_ = pc.Shutdown()
			emit("done", map[string]any{"received": 0})
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	sortQueues(queues)
	qs := make([]map[string]any, len(queues))
	for i, q := range queues {
		qs[i] = map[string]any{"brokerName": q.BrokerName, "queueId": q.QueueId}
	}
	emit("queues", map[string]any{"queues": qs})
	maxNum := c.MaxNum
	if maxNum <= 0 {
		maxNum = 32
	}
	commit := c.Commit == nil || *c.Commit
	hold := 1500 * time.Millisecond
	if c.PullHoldS != nil {
		hold = time.Duration(*c.PullHoldS * float64(time.Second))
	}
	received := 0
	ctx := context.Background()
	commits := map[*primitive.MessageQueue]int64{}
	for _, q := range queues {
		var offset int64
		var stored any
		if c.Start == "" || c.Start == "stored" {
			s, err := pc.CurrentOffset(q)
			if err != nil {
				emit("pull_error", map[string]any{"queueId": q.QueueId, "error": "CurrentOffset: " + errText(err)})
			}
			stored, offset = s, max(s, 0)
		}
		emit("queue_start", map[string]any{"queueId": q.QueueId, "storedOffset": stored, "offset": offset})
		for c.Limit == nil || received < *c.Limit {
			n := maxNum
			if c.Limit != nil {
				n = min(maxNum, *c.Limit-received)
			}
			res, err, held := pullOnce(ctx, pc, q, offset, n, hold)
			if held {
				emit("pull_status", map[string]any{"queueId": q.QueueId, "status": "HELD", "offset": offset,
					"held_s": hold.Seconds()})
				break
			}
			if err != nil {
				emit("pull_error", map[string]any{"queueId": q.QueueId, "offset": offset, "error": errText(err)})
				break
			}
			if res.Status == primitive.PullFound {
				got := res.GetMessageExts()
				for _, m := range got {
					emit("message", describe(m))
				}
				received += len(got)
				offset = res.NextBeginOffset
				if offset >= res.MaxOffset { // at the end: another pull would only be held by the broker
					emit("pull_status", map[string]any{"queueId": q.QueueId, "status": "AT_MAX_OFFSET",
						"nextBeginOffset": offset, "minOffset": res.MinOffset, "maxOffset": res.MaxOffset})
					break
				}
				continue
			}
			emit("pull_status", map[string]any{"queueId": q.QueueId, "status": pullStatus(res.Status),
				"nextBeginOffset": res.NextBeginOffset, "minOffset": res.MinOffset, "maxOffset": res.MaxOffset})
			if (res.Status == primitive.PullNoMsgMatched || res.Status == primitive.PullOffsetIllegal) &&
				res.NextBeginOffset > offset {
				offset = res.NextBeginOffset
				continue
			}
			break
		}
		if commit {
			if err := pc.UpdateOffset(q, offset); err != nil {
				emit("pull_error", map[string]any{"queueId": q.QueueId, "error": "UpdateOffset: " + errText(err)})
			}
			commits[q] = offset
			emit("committed", map[string]any{"queueId": q.QueueId, "offset": offset})
		}
	}
	if commit {
		// PersistOffset sends only the queues the consumer's rebalance has assigned so far (it
		// drops the others' offsets: remoteBrokerOffsetStore.persist keeps processQueueTable's
		// queues only), and that rebalance runs on its own schedule after Start: give it time.
		time.Sleep(2 * time.Second)
		// A rebalance that assigns a queue first removes the queue's offset from the client's
		// store (updateProcessQueueTable: storage.remove), so one that ran after a queue's
		// UpdateOffset above (late on a busy machine) has dropped it: set every offset again.
		for q, off := range commits {
			if err := pc.UpdateOffset(q, off); err != nil {
				emit("pull_error", map[string]any{"queueId": q.QueueId, "error": "UpdateOffset: " + errText(err)})
			}
		}
		if err := pc.PersistOffset(ctx, c.Topic); err != nil {
			emit("pull_error", map[string]any{"error": "PersistOffset: " + errText(err)})
		}
		time.Sleep(300 * time.Millisecond) // UPDATE_CONSUMER_OFFSET is one-way: let it leave
	}
	if err := pc.Shutdown(); err != nil {
		emit("shutdown_error", map[string]any{"error": errText(err)})
	}
	emit("done", map[string]any{"received": received})
	return nil
}

func sortQueues(qs []*primitive.MessageQueue) {
	for i := 1; i < len(qs); i++ {
		for j := i; j > 0 && (qs[j].BrokerName < qs[j-1].BrokerName ||
			qs[j].BrokerName == qs[j-1].BrokerName && qs[j].QueueId < qs[j-1].QueueId); j-- {
			qs[j], qs[j-1] = qs[j-1], qs[j]
		}
	}
}

// pullOnce runs PullFrom, which always asks the broker to hold the request (long polling, up to
// 20 s) when nothing is there yet: after `hold` it is reported as held and abandoned (its late
// answer is dropped; the offsets this driver commits are its own).
func pullOnce(ctx context.Context, pc interface {
	PullFrom(context.Context, *primitive.MessageQueue, int64, int) (*primitive.PullResult, error)
}, q *primitive.MessageQueue, offset int64, n int, hold time.Duration) (*primitive.PullResult, error, bool) {
	type answer struct {
		res *primitive.PullResult
		err error
	}
	ch := make(chan answer, 1)
	qc := *q
	go func() {
		res, err := pc.PullFrom(ctx, &qc, offset, n)
		ch <- answer{res, err}
	}()
	select {
	case a := <-ch:
		return a.res, a.err, false
	case <-time.After(hold):
		return nil, nil, true
	}
}
