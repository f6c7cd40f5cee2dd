package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// sendStatus names a SendStatus the way Java and the broker do.
func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "UNKNOWN_ERROR"
}

func buildMessage(topic string, spec *MsgSpec) (*primitive.Message, error) {
	body, err := unb64(spec.BodyB64)
	if err != nil {
		return nil, fmt.Errorf("body_b64: %w", err)
	}
	msg := primitive.NewMessage(topic, body)
	if spec.Tags != "" {
		msg.WithTag(spec.Tags)
	}
	if spec.Keys != "" {
		msg.WithKeys(strings.Split(spec.Keys, primitive.PropertyKeySeparator))
	}
	for k, v := range spec.Props {
		msg.WithProperty(k, v)
	}
	if spec.DelayLevel > 0 {
		msg.WithDelayTimeLevel(spec.DelayLevel)
	}
	msg.Flag = spec.Flag
	return msg, nil
}

// shardSelector picks queue shard % number of queues, like Java's SelectMessageQueueByHash for an
// Integer argument and the C++ wrapper's send_orderly; messages without a shard go round robin.
type shardSelector struct {
	mu     sync.Mutex
	shards map[*primitive.Message]int
	rr     producer.QueueSelector
}

func (s *shardSelector) Select(msg *primitive.Message, mqs []*primitive.MessageQueue, last string) *primitive.MessageQueue {
	s.mu.Lock()
	shard, ok := s.shards[msg]
	s.mu.Unlock()
	if !ok || len(mqs) == 0 {
		return s.rr.Select(msg, mqs, last)
	}
	if shard < 0 {
		shard = -shard
	}
	return mqs[shard%len(mqs)]
}

func producerOptions(c *Case, selector producer.QueueSelector) []producer.Option {
	timeout := c.SendTimeoutMs
	if timeout <= 0 {
		timeout = 3000
	}
	retries := 2 // Java's retryTimesWhenSendFailed
	if c.Retries != nil {
		retries = *c.Retries
	}
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{c.Namesrv})),
		producer.WithGroupName(c.Group),
		producer.WithInstanceName(instanceName(c)),
		producer.WithSendMsgTimeout(time.Duration(timeout) * time.Millisecond),
		producer.WithRetry(retries),
		producer.WithQueueSelector(selector),
	}
	if cred, ok := credentials(c); ok {
		opts = append(opts, producer.WithCredentials(cred))
	}
	if c.Tls {
		opts = append(opts, producer.WithTls(true))
	}
	return opts
}

func sentFields(i int, r *primitive.SendResult, msg *primitive.Message) map[string]any {
	f := map[string]any{
		"index": i, "status": sendStatus(r.Status), "msgId": r.MsgID, "offsetMsgId": r.OffsetMsgID,
		"queueOffset": r.QueueOffset, "uniqKey": msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex),
	}
	if r.MessageQueue != nil {
		f["queueId"] = r.MessageQueue.QueueId
		f["brokerName"] = r.MessageQueue.BrokerName
	}
	if r.TransactionID != "" {
		f["transactionId"] = r.TransactionID
	}
	return f
}

func runProduce(c *Case) error {
	if c.Mode == "transaction" {
		return runTransaction(c)
	}
	sel := &shardSelector{shards: map[*primitive.Message]int{}, rr: producer.NewRoundRobinQueueSelector()}
	p, err := producer.NewDefaultProducer(producerOptions(c, sel)...)
	if err != nil {
		return fmt.Errorf("NewDefaultProducer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("producer start: %w", err)
	}
	emit("started", nil)
	mode := c.Mode
	if mode == "" {
		mode = "sync"
	}
	ctx := context.Background()
	msgs := make([]*primitive.Message, len(c.Messages))
	for i := range c.Messages {
		if msgs[i], err = buildMessage(c.Topic, &c.Messages[i]); err != nil {
			return err
		}
	}
	switch mode {
	case "batch":
		r, err := p.SendSync(ctx, msgs...)
		if err != nil {
			emit("send_error", map[string]any{"index": 0, "error": errText(err)})
			break
		}
		f := sentFields(0, r, msgs[0])
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)
		}
		f["count"], f["msgIds"] = len(msgs), ids
		emit("sent", f)
	case "sync", "orderly":
		for i, msg := range msgs {
			if mode == "orderly" {
				sel.mu.Lock()
				sel.shards[msg] = c.Messages[i].Shard
				sel.mu.Unlock()
			}
			r, err := p.SendSync(ctx, msg)
			if err != nil {
				emit("send_error", map[string]any{"index": i, "error": errText(err)})
				continue
			}
			f := sentFields(i, r, msg)
			if mode == "orderly" {
				f["shard"] = c.Messages[i].Shard
			}
			emit("sent", f)
		}
	case "async":
		var wg sync.WaitGroup
		for i, msg := range msgs {
			i, msg := i, msg
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					emit("send_error", map[string]any{"index": i, "error": errText(err)})
					return
				}
				emit("sent", sentFields(i, r, msg))
			}, msg)
			if err != nil {
				wg.Done()
				emit("send_error", map[string]any{"index": i, "error": errText(err)})
			}
		}
		waitGroup(&wg, 3*time.Duration(max(c.SendTimeoutMs, 3000))*time.Millisecond)
	case "oneway":
		for i, msg := range msgs {
			if err := p.SendOneWay(ctx, msg); err != nil {
				emit("send_error", map[string]any{"index": i, "error": errText(err)})
				continue
			}
			emit("sent", map[string]any{"index": i, "status": "ONEWAY",
				"msgId": msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)})
		}
		linger := 1.0
		if c.OnewayLingerS != nil {
			linger = *c.OnewayLingerS
		}
		time.Sleep(time.Duration(linger * float64(time.Second))) // let the bytes leave before shutdown
	default:
		return fmt.Errorf("unknown produce mode %q", mode)
	}
	if err := p.Shutdown(); err != nil {
		emit("shutdown_error", map[string]any{"error": errText(err)})
	}
	emit("done", nil)
	return nil
}

func waitGroup(wg *sync.WaitGroup, limit time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// txListener answers the local transaction and the broker's check-backs from the case.
type txListener struct {
	mu      sync.Mutex
	c       *Case
	byBody  map[string]int // body -> message index (the test bodies are unique)
	checks  map[int]int    // index -> check-backs answered so far
	settled map[int]bool   // index -> a check-back was answered COMMIT or ROLLBACK
}

func txState(answer string) primitive.LocalTransactionState {
	switch strings.ToLower(answer) {
	case "commit", "":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func txName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

func (l *txListener) ExecuteLocalTransaction(msg *primitive.Message) primitive.LocalTransactionState {
	l.mu.Lock()
	i, ok := l.byBody[string(msg.Body)]
	l.mu.Unlock()
	if !ok {
		return primitive.UnkonwnState
	}
	st := txState(l.c.Messages[i].Tx)
	emit("local_tx", map[string]any{"index": i, "state": txName(st),
		"uniqKey": msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), "transactionId": msg.TransactionId})
	return st
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	i, ok := l.byBody[string(m.Body)]
	n := 0
	if ok {
		n = l.checks[i]
		l.checks[i] = n + 1
	}
	l.mu.Unlock()
	st := primitive.CommitMessageState
	if ok {
		spec := l.c.Messages[i]
		if n < spec.CheckUnknownTimes {
			st = primitive.UnkonwnState
		} else {
			st = txState(spec.Check)
		}
	}
	f := describe(m)
	f["index"], f["known"], f["answer"], f["checkNumber"] = i, ok, txName(st), n+1
	f["transactionId"] = m.TransactionId
	emit("check", f)
	if ok && st != primitive.UnkonwnState {
		l.mu.Lock()
		l.settled[i] = true
		l.mu.Unlock()
	}
	return st
}

// pending: messages whose local answer was UNKNOWN and whose check-back has not settled them.
func (l *txListener) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i, spec := range l.c.Messages {
		if txState(spec.Tx) == primitive.UnkonwnState && !l.settled[i] {
			n++
		}
	}
	return n
}

// runTransaction sends each message as a half message, answers the local transaction with its
// "tx" and then stays up to answer the broker's check-backs until every UNKNOWN message is
// settled (bounded by check_wait_s), or until "stop" on stdin.
func runTransaction(c *Case) error {
	l := &txListener{c: c, byBody: map[string]int{}, checks: map[int]int{}, settled: map[int]bool{}}
	for i := range c.Messages {
		body, err := unb64(c.Messages[i].BodyB64)
		if err != nil {
			return err
		}
		l.byBody[string(body)] = i
	}
	stop, _ := watchStdin()
	p, err := producer.NewTransactionProducer(l, producerOptions(c, producer.NewRoundRobinQueueSelector())...)
	if err != nil {
		return fmt.Errorf("NewTransactionProducer: %w", err)
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("producer start: %w", err)
	}
	emit("started", nil)
	for i := range c.Messages {
		msg, err := buildMessage(c.Topic, &c.Messages[i])
		if err != nil {
			return err
		}
		r, err := p.SendMessageInTransaction(context.Background(), msg)
		if err != nil {
			emit("send_error", map[string]any{"index": i, "error": errText(err)})
			continue
		}
		f := sentFields(i, r.SendResult, msg)
		f["localState"] = txName(r.State)
		emit("sent", f)
	}
	wait := 60.0
	if c.CheckWaitS != nil {
		wait = *c.CheckWaitS
	}
	until := time.Now().Add(time.Duration(wait * float64(time.Second)))
	for l.pending() > 0 && time.Now().Before(until) {
		select {
		case <-stop:
			until = time.Now()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n := l.pending(); n > 0 {
		emit("check_timeout", map[string]any{"pending": n, "waited_s": wait})
	}
	if c.LingerS > 0 { // stay for further (unexpected) check-backs, which the test then sees
		select {
		case <-stop:
		case <-time.After(time.Duration(c.LingerS * float64(time.Second))):
		}
	}
	if err := p.Shutdown(); err != nil {
		emit("shutdown_error", map[string]any{"error": errText(err)})
	}
	emit("done", nil)
	return nil
}
