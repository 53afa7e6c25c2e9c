package extract

import "github.com/engram-memory/engram/pkg/llm"

// Bounds of the reply schema. The model is asked for labels of at most 140
// characters; the schema allows 300 so that a slightly long label is not a
// schema violation.
const (
	MaxReplyMemories  = 5
	MaxReplyVerdicts  = 24
	MaxLabelChars     = 300
	MaxBodyChars      = 600
	MaxReplyPaths     = 6
	MaxPathChars      = 160
	MaxReplyEntities  = 8 // memory.MaxEntities
	MaxEntityChars    = 60
	MaxReplyRelations = 8
	MaxIDChars        = 40
)

// Reply is what one extraction call returns.
type Reply struct {
	Verdicts []ReplyVerdict `json:"verdicts" llm:"maxItems=24" desc:"one verdict for each memory listed under INJECTED MEMORIES; empty when none was listed"`
	Memories []ReplyMemory  `json:"memories" llm:"maxItems=5" desc:"what these turns established that is worth remembering; empty when nothing was"`
}

// ReplyVerdict judges one injected memory.
type ReplyVerdict struct {
	ID      string `json:"id" llm:"maxLength=40" desc:"the id in square brackets, copied exactly"`
	Verdict string `json:"verdict" llm:"enum=used|wrong|ignored" desc:"used: it helped or was followed; wrong: it was incorrect or the user contradicted it; ignored: it played no part"`
}

// ReplyMemory is one memory the model proposes.
type ReplyMemory struct {
	Subkind    string          `json:"subkind" llm:"enum=preference|decision|pattern|failure|observation" desc:"preference: how the user wants things done; decision: a choice that was made; pattern: how this codebase or user usually works; failure: something that went wrong and why; observation: a fact learned"`
	Scope      string          `json:"scope" llm:"enum=project|global|session" desc:"project: holds for this project; global: holds for the user everywhere; session: only for this conversation"`
	Reach      string          `json:"reach" llm:"enum=here|anywhere" desc:"anywhere: useful in other projects too; here: only in this one"`
	AssertedBy string          `json:"asserted_by" llm:"enum=user|assistant|inferred" desc:"user: the user said it; assistant: the assistant stated or decided it; inferred: you concluded it"`
	Label      string          `json:"label" llm:"maxLength=300" desc:"one self-contained sentence, at most 140 characters"`
	Body       string          `json:"body" llm:"maxLength=600" desc:"details and the reason, or empty"`
	Confidence float64         `json:"confidence" llm:"minimum=0,maximum=1" desc:"0.95 stated by the user, 0.7 implied, 0.4 inferred"`
	Paths      []string        `json:"paths" llm:"maxItems=6,maxLength=160" desc:"repository paths it is about, or empty"`
	Entities   []string        `json:"entities" llm:"maxItems=8,maxLength=60" desc:"names of tools, libraries, people or things it mentions"`
	Relations  []ReplyRelation `json:"relations" llm:"maxItems=8" desc:"its relation to memories listed under RELATED MEMORIES or INJECTED MEMORIES"`
}

// ReplyRelation relates a proposed memory to a memory the model was shown.
type ReplyRelation struct {
	ID       string `json:"id" llm:"maxLength=40" desc:"the id in square brackets, copied exactly"`
	Relation string `json:"relation" llm:"enum=same|opposite|different" desc:"same: says the same thing; opposite: contradicts it; different: neither"`
}

// SchemaName is the name of the reply schema in the llm schema registry.
const SchemaName = "extract.memories"

// replySchema registers the reply schema so the real-Ollama suite sends it
// to a real model.
var replySchema = llm.RegisterSchema[Reply](SchemaName)

// PredictTokens is the num_predict an extraction call needs (the bound of
// the reply schema): a configured llm MaxPredict below it makes every call
// fail.
func PredictTokens() int { return replySchema.PredictTokens() }
