package memory

// WithoutNeutraliseCache turns the neutraliser's cache off for a test or
// a benchmark (the rules every time) and back on after it.
var WithoutNeutraliseCache = withoutCache
