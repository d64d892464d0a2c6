package road

import (
	"reflect"
	"testing"

	"github.com/raet-go/raet/road/internal/core"
)

// TestCountersTwins checks that road.Counters has every core.Counters field
// and that countersOf copies each one: Counters is the one public twin a
// conversion cannot check at build time (its RTT field has road's RTTStats).
func TestCountersTwins(t *testing.T) {
	var c core.Counters
	cv := reflect.ValueOf(&c).Elem()
	rt := reflect.TypeFor[Counters]()
	if rt.NumField() != cv.NumField() {
		t.Errorf("road.Counters has %d fields, core.Counters %d", rt.NumField(), cv.NumField())
	}
	for i := range cv.NumField() {
		f := cv.Type().Field(i)
		if _, ok := rt.FieldByName(f.Name); !ok {
			t.Errorf("core.Counters.%s has no road.Counters twin", f.Name)
			continue
		}
		fill(t, cv.Field(i), f.Name, i)
	}
	if t.Failed() {
		return
	}
	got := reflect.ValueOf(countersOf(c))
	for i := range cv.NumField() {
		name := cv.Type().Field(i).Name
		want := cv.Field(i)
		g := got.FieldByName(name)
		if g.Type() != want.Type() {
			g = g.Convert(want.Type()) // RTT: road.RTTStats from core.RTTStats
		}
		if !reflect.DeepEqual(want.Interface(), g.Interface()) {
			t.Errorf("countersOf does not copy %s: core %v, road %v", name, want, g)
		}
	}
}

// fill gives v a value distinct from its zero and from the other fields'.
func fill(t *testing.T, v reflect.Value, name string, i int) {
	t.Helper()
	switch v.Kind() {
	case reflect.Map:
		v.Set(reflect.ValueOf(map[string]uint64{name: uint64(i + 1)}))
	case reflect.Uint64:
		v.SetUint(uint64(1000 + i))
	case reflect.Int:
		v.SetInt(int64(1000 + i))
	case reflect.Struct:
		for j := range v.NumField() {
			fill(t, v.Field(j), name+"."+v.Type().Field(j).Name, 100*i+j)
		}
	case reflect.Int64:
		v.SetInt(int64(1000 + i))
	default:
		t.Fatalf("%s: no value for %v; teach fill", name, v.Type())
	}
}

// TestDeliverConversionAllocs checks that handing a core message and event to
// the Receive and Events channels as road's types copies them without
// allocating: the conversion is on the receive path.
func TestDeliverConversionAllocs(t *testing.T) {
	ms := []core.Message{{From: "alpha", Raw: []byte("x"), Body: map[string]any{"a": 1}}}
	es := []core.Event{{Kind: EventJoined, Remote: "alpha", Reason: ReasonNone}}
	recv, events := make(chan Message, 1), make(chan Event, 1)
	n := testing.AllocsPerRun(1000, func() {
		recv <- messageOf(&ms[0])
		events <- eventOf(&es[0])
		<-recv
		<-events
	})
	if n != 0 {
		t.Errorf("delivering a message and an event allocates %v times, want 0", n)
	}
	if m := messageOf(&ms[0]); m.From != "alpha" || string(m.Raw) != "x" || m.Body["a"] != 1 {
		t.Errorf("messageOf = %+v", m)
	}
}
