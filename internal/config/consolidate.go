package config

// consolidateSettings are the consolidator's constants (ENGRAM_CONSOLIDATE_*;
// its model is ENGRAM_CONSOLIDATE_MODEL, the model's window
// ENGRAM_CONSOLIDATE_CONTEXT_LENGTH).
func (c *Config) consolidateSettings() []Setting {
	return []Setting{
		{Flag: "consolidate-step-budget", Env: "ENGRAM_CONSOLIDATE_STEP_BUDGET", Group: Runtime, value: (*intV)(&c.Consolidate.Limits.Budget),
			Usage: "consolidator: tool-call steps of a pass before it is told to finish (it stops one step later)"},
		{Flag: "consolidate-max-nudges", Env: "ENGRAM_CONSOLIDATE_MAX_NUDGES", Group: Runtime, value: (*intV)(&c.Consolidate.Limits.MaxNudges),
			Usage: "consolidator: answers without a tool call nudged before a pass is stopped"},
		{Flag: "consolidate-recall-limit", Env: "ENGRAM_CONSOLIDATE_RECALL_LIMIT", Group: Runtime, value: (*intV)(&c.Consolidate.Limits.RecallLimit),
			Usage: "consolidator: recalls in a row before recall is withdrawn"},
		{Flag: "consolidate-memory-tokens", Env: "ENGRAM_CONSOLIDATE_MEMORY_TOKENS", Group: Runtime, value: (*intV)(&c.Consolidate.MemoryTokens),
			Usage: "consolidator: token budget of the stored memories shown at each step"},
		{Flag: "consolidate-window-messages", Env: "ENGRAM_CONSOLIDATE_WINDOW_MESSAGES", Group: Runtime, value: (*intV)(&c.Consolidate.WindowMessages),
			Usage: "consolidator: most transcript messages a pass reads, the oldest after the cursor (a longer backlog takes more passes)"},
		{Flag: "consolidate-window-chars", Env: "ENGRAM_CONSOLIDATE_WINDOW_CHARS", Group: Runtime, value: (*intV)(&c.Consolidate.WindowChars),
			Usage: "consolidator: characters of transcript a pass reads in all"},
		{Flag: "consolidate-context-length", Env: "ENGRAM_CONSOLIDATE_CONTEXT_LENGTH", Group: Runtime, value: (*intV)(&c.LLM.Consolidate.ContextLength),
			Usage: "consolidator: the consolidation model's context window in tokens, sent as num_ctx on every call; every step's prompt is bounded by it, the transcript window gets what the rest leaves (0: the model's own from Ollama, at most 32768)"},
		{Flag: "consolidate-similar-cosine", Env: "ENGRAM_CONSOLIDATE_SIMILAR_COSINE", Group: Runtime, value: (*floatV)(&c.Consolidate.SimilarCosine),
			Usage: "consolidator: remember holds a fact this close (cosine) to a stored one for review"},
		{Flag: "consolidate-similar-overlap", Env: "ENGRAM_CONSOLIDATE_SIMILAR_OVERLAP", Group: Runtime, value: (*floatV)(&c.Consolidate.SimilarOverlap),
			Usage: "consolidator: remember holds a fact sharing this share of words with a recent one for review"},
		{Flag: "consolidate-temperature", Env: "ENGRAM_CONSOLIDATE_TEMPERATURE", Group: Runtime, value: (*floatV)(&c.Consolidate.Temperature),
			Usage: "consolidator: sampling temperature of the pass's model calls"},
	}
}
