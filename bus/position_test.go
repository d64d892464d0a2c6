package bus_test

import (
	"testing"
	"testing/synctest"
)

// Position counts the messages the application took from Messages, not
// those still buffered: resuming from it after the subscriber dies loses
// none of them (ExampleSubscription_Position resumes).
func TestPositionCountsWhatWasTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, nil, "pub", "sub")
		pub, sn := ns[0], ns[1]
		s, err := sn.Subscribe("pub", []string{">"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-s.Ready()
		publishN(t, pub, "x", 0, 10)
		synctest.Wait() // all ten are buffered at the subscriber
		if st := s.Stats(); st.Messages != 10 {
			t.Fatalf("%d messages buffered", st.Messages)
		}
		for range 3 {
			<-s.Messages()
		}
		epoch, seq := s.Position()
		if seq != 3 || epoch == 0 {
			t.Fatalf("position (%d, %d) after taking 3 of 10 buffered messages, want seq 3", epoch, seq)
		}
		<-s.Messages()
		if _, seq := s.Position(); seq != 4 {
			t.Fatalf("position seq %d after taking 4, want 4", seq)
		}
	})
}
