package natsembed

// GuardProbed is Guard with the store's failure read from probe instead
// of StoreFailure.
func (s *Server) GuardProbed(o GuardOptions, probe func() error) *Guard { return s.guard(o, probe) }
