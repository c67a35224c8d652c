package transport

import (
	"encoding/json"
	"strings"
)

// notification is the JSON body SNS delivers to a queue subscribed
// without raw message delivery: the published message and its
// attributes, wrapped.
type notification struct {
	Type              string `json:"Type"`
	MessageID         string `json:"MessageId"`
	TopicArn          string `json:"TopicArn"`
	Message           string `json:"Message"`
	MessageAttributes map[string]struct {
		Type  string `json:"Type"`
		Value string `json:"Value"`
	} `json:"MessageAttributes"`
}

// snsNotification reports whether body is an SNS notification and returns
// it. transit subscribes its own queues with raw delivery, but a producer
// may subscribe a command queue to a topic of its own without it.
func snsNotification(body string) (notification, bool) {
	// Cheap test first: every command body is JSON, few are notifications.
	if !strings.Contains(body, `"TopicArn"`) {
		return notification{}, false
	}
	var n notification
	if err := json.Unmarshal([]byte(body), &n); err != nil || n.Type != "Notification" || n.TopicArn == "" || n.MessageID == "" {
		return notification{}, false
	}
	return n, true
}
