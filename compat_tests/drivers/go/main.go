// Command rmqd-go-driver runs one compat case with the official Go client
// (github.com/apache/rocketmq-client-go/v2), mirroring drivers/cpp_client.py:
//
//	rmqd-go-driver CASE.json
//
// CASE.json: {"role": "produce" | "push" | "pull", "namesrv", "topic", "group", "deadline_s", ...}.
// stdout: JSON lines {"event": ...} (the client's own logging is silenced or goes to stderr);
// stdin: a line "stop" (or EOF) ends a push consumer or a lingering transactional producer.
// Exit code 0 = ran to the end, 3 = deadline hit, 2 = driver error.
//
// The Go client has no queryMessage / viewMessage API (its admin package offers topic and
// group administration only), so those roles do not exist here; client.py says so.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// Case is the JSON case description; the field names are those of the Python and Node drivers.
type Case struct {
	Role          string    `json:"role"`
	Namesrv       string    `json:"namesrv"`
	Topic         string    `json:"topic"`
	Group         string    `json:"group"`
	DeadlineS     float64   `json:"deadline_s"`
	Mode          string    `json:"mode"`
	Messages      []MsgSpec `json:"messages"`
	SendTimeoutMs int       `json:"send_timeout_ms"`
	OnewayLingerS *float64  `json:"oneway_linger_s"`
	AccessKey     string    `json:"accessKey"`
	SecretKey     string    `json:"secretKey"`
	Tls           bool      `json:"tls"`
	Instance      string    `json:"instance"`
	Retries       *int      `json:"retries"`
	CheckWaitS    *float64  `json:"check_wait_s"`
	LingerS       float64   `json:"linger_s"`
	Model         string    `json:"model"`
	Expression    string    `json:"expression"`
	ExprType      string    `json:"expression_type"`
	Orderly       bool      `json:"orderly"`
	ThreadCount   int       `json:"thread_count"`
	StopAfter     int       `json:"stop_after"`
	FailPrefixB64 string    `json:"fail_prefix_b64"`
	FailTimes     *int      `json:"fail_times"`
	MaxReconsume  *int32    `json:"max_reconsume_times"`
	ConsumeFrom   string    `json:"consume_from"`
	Start         string    `json:"start"`
	Limit         *int      `json:"limit"`
	MaxNum        int       `json:"max_num"`
	Commit        *bool     `json:"commit"`
	QueueWaitS    *float64  `json:"queue_wait_s"`
	PullHoldS     *float64  `json:"pull_hold_s"`
}

// MsgSpec is one message to send.
type MsgSpec struct {
	BodyB64    string            `json:"body_b64"`
	Tags       string            `json:"tags"`
	Keys       string            `json:"keys"`
	Props      map[string]string `json:"props"`
	DelayLevel int               `json:"delay_level"`
	Flag       int32             `json:"flag"`
	Shard      int               `json:"shard"`
	// transactions: the local transaction's answer, the check-back's answer and how many
	// check-backs are answered UNKNOWN before that.
	Tx                string `json:"tx"`
	Check             string `json:"check"`
	CheckUnknownTimes int    `json:"check_unknown_times"`
}

var outMu sync.Mutex

// emit writes one JSON line; "t" is the wall clock in seconds, like the other drivers.
func emit(event string, fields map[string]any) {
	line := map[string]any{"event": event, "t": float64(time.Now().UnixMilli()) / 1000}
	for k, v := range fields {
		line[k] = v
	}
	data, err := json.Marshal(line)
	if err != nil {
		data, _ = json.Marshal(map[string]any{"event": "driver_error", "error": err.Error()})
	}
	outMu.Lock()
	os.Stdout.Write(append(data, '\n'))
	outMu.Unlock()
}

// hardExit leaves at once, whatever the client's goroutines are doing (stdout is unbuffered).
func hardExit(code int) {
	outMu.Lock()
	os.Exit(code)
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func unb64(text string) ([]byte, error) { return base64.StdEncoding.DecodeString(text) }

// watchStdin closes `stop` on a "stop" line and `eof` when stdin ends (the harness closes the
// stdin of drivers that end by themselves at once, so only push consumers treat EOF as stop).
func watchStdin() (stop <-chan struct{}, eof <-chan struct{}) {
	stopCh, eofCh := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(eofCh)
		buf := make([]byte, 4096)
		var line []byte
		stopped := false
		for {
			n, err := os.Stdin.Read(buf)
			for _, c := range buf[:n] {
				if c != '\n' {
					line = append(line, c)
					continue
				}
				if !stopped && strings.TrimSpace(string(line)) == "stop" {
					stopped = true
					close(stopCh)
				}
				line = line[:0]
			}
			if err != nil {
				return
			}
		}
	}()
	return stopCh, eofCh
}

func credentials(c *Case) (primitive.Credentials, bool) {
	if c.AccessKey == "" && c.SecretKey == "" {
		return primitive.Credentials{}, false
	}
	return primitive.Credentials{AccessKey: c.AccessKey, SecretKey: c.SecretKey}, true
}

// instanceName keeps two driver processes of one group apart (the client id is ip@instance).
func instanceName(c *Case) string {
	if c.Instance != "" {
		return c.Instance
	}
	return fmt.Sprintf("go-%d", os.Getpid())
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func main() {
	// The client logs through logrus to stderr; keep only errors so the test's stderr file stays short.
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("error")
	}
	if len(os.Args) < 2 {
		emit("driver_error", map[string]any{"error": "usage: rmqd-go-driver CASE.json"})
		hardExit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		emit("driver_error", map[string]any{"error": err.Error()})
		hardExit(2)
	}
	var c Case
	if err := json.Unmarshal(raw, &c); err != nil {
		emit("driver_error", map[string]any{"error": "case file: " + err.Error()})
		hardExit(2)
	}
	deadline := c.DeadlineS
	if deadline <= 0 {
		deadline = 60
	}
	time.AfterFunc(time.Duration(deadline*float64(time.Second)), func() {
		emit("timeout", map[string]any{"after_s": deadline})
		hardExit(3)
	})
	defer func() {
		if r := recover(); r != nil {
			emit("driver_error", map[string]any{"error": fmt.Sprint(r), "tb": string(debug.Stack())})
			hardExit(2)
		}
	}()
	switch c.Role {
	case "produce":
		err = runProduce(&c)
	case "push":
		err = runPush(&c)
	case "pull":
		err = runPull(&c)
	default:
		err = fmt.Errorf("unknown role %q (the Go client has no query/view message API)", c.Role)
	}
	if err != nil {
		emit("driver_error", map[string]any{"error": err.Error()})
		hardExit(2)
	}
	hardExit(0)
}
