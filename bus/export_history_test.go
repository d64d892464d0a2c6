package bus

import "sync"

// HoldHistoryWrites takes the write lock of h's bbolt file, so that no
// group commit is written until release is called (again: nothing).
func HoldHistoryWrites(h *MemoryHistory) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	stop := make(chan struct{})
	go func() { // a bbolt transaction stays on one goroutine
		defer close(done)
		tx, err := h.store.db.Begin(true)
		close(held)
		if err != nil {
			return
		}
		<-stop
		tx.Rollback()
	}()
	<-held
	return sync.OnceFunc(func() {
		close(stop)
		<-done
	})
}
