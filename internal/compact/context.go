package compact

import (
	"context"
	"fmt"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm"
	"github.com/engram-memory/engram/pkg/memory"
)

// Context builds what the platform sends next for a session (the context
// API, events.Client.Context): for req.AfterID 0, the block (Preamble, the
// latest summary between the markers, EndMarker; empty without a summary)
// and the stored messages after the summary's boundary; for a later page,
// the messages after req.AfterID. It is an events.ContextFunc.
func (c *Compactor) Context(ctx context.Context, ref events.Ref, req events.ContextRequest) (events.ContextReply, error) {
	sref := memory.SessionRef{Tenant: ref.TenantID, Project: ref.ProjectID, Session: ref.SessionID}
	if err := memory.CheckSession(sref); err != nil {
		return events.ContextReply{}, fmt.Errorf("compact: context: %w", err)
	}
	var r events.ContextReply
	after := req.AfterID
	if after == 0 {
		sum, err := c.latest(ctx, sref)
		if err != nil {
			return r, err
		}
		r.Summary, r.UpTo = memory.NeutraliseText(sum.Content), sum.UpTo
		r.Block = Block(sum.Content)
		after = sum.UpTo
	}
	msgs, err := c.store.Messages(ctx, sref, after, 0)
	if err != nil {
		return r, fmt.Errorf("compact: context: read transcript of %s: %w", sref, err)
	}
	r.Messages = make([]events.ContextMessage, len(msgs))
	for i, m := range msgs {
		r.Messages[i] = toEvent(m)
	}
	if req.AfterID == 0 {
		r.Tokens = int64(llm.EstimateTokens(r.Block)) + Tokens(msgs)
	}
	return r, nil
}

func toEvent(m memory.Message) events.ContextMessage {
	em := events.ContextMessage{ID: m.ID, TurnID: m.TurnID, Message: events.Message{
		Role: events.Role(m.Role), Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID,
		ToolStatus: events.ToolStatus(m.ToolStatus), TokensIn: m.TokensIn, TokensOut: m.TokensOut,
	}}
	for _, tc := range m.ToolCalls {
		em.ToolCalls = append(em.ToolCalls, events.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return em
}
