package road

import (
	"bytes"
	"log/slog"
	"reflect"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road/internal/core"
)

// coreOnly are the core.Config fields that have no road.Config twin, and why:
// populate sets them itself.
var coreOnly = map[string]string{
	"DecodeLater": "the stack's readers always decode off the owner goroutine",
	"SignLater":   "the stack's writer always signs off the owner goroutine",
	"FQDN":        "the stack looks remotes' names up itself (fqdn.go)",
}

// TestConfigTwins checks that every core.Config field has a road.Config
// field of the same name and type, and that populate copies it: a field added
// to the core and forgotten in road (or in populate's copy) fails here, not in
// a user's program that sets it and sees no effect.
func TestConfigTwins(t *testing.T) {
	var c Config
	rv := reflect.ValueOf(&c).Elem()
	ct := reflect.TypeFor[core.Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if _, ok := coreOnly[f.Name]; ok {
			continue
		}
		twin, ok := rv.Type().FieldByName(f.Name)
		if !ok {
			t.Errorf("core.Config.%s has no road.Config twin (add it, or list it in coreOnly with the reason)", f.Name)
			continue
		}
		if twin.Type != f.Type {
			t.Errorf("road.Config.%s is %v, core.Config.%s is %v", f.Name, twin.Type, f.Name, f.Type)
			continue
		}
		setDistinct(t, rv.FieldByIndex(twin.Index), f.Name, i)
	}
	for name := range coreOnly {
		if _, ok := ct.FieldByName(name); !ok {
			t.Errorf("coreOnly names %s, which core.Config no longer has", name)
		}
	}
	if t.Failed() {
		return
	}
	_, cc, err := populate(&c)
	if err != nil {
		t.Fatalf("populate: %v", err)
	}
	cv := reflect.ValueOf(cc).Elem()
	for i := range ct.NumField() {
		name := ct.Field(i).Name
		if _, ok := coreOnly[name]; ok {
			continue
		}
		want, got := rv.FieldByName(name).Interface(), cv.Field(i).Interface()
		if !reflect.DeepEqual(want, got) {
			t.Errorf("populate does not copy %s: road %v, core %v", name, want, got)
		}
	}
}

// setDistinct gives v a valid value that no default has, so that a field
// populate forgot to copy shows as the core's default instead.
func setDistinct(t *testing.T, v reflect.Value, name string, i int) {
	t.Helper()
	switch x := v.Addr().Interface().(type) {
	case *codec.HeadKind:
		*x = codec.HeadKindJSON
	case *codec.BodyKind:
		*x = codec.BodyKindMsgpack
	case *keep.AutoMode:
		*x = keep.AutoAlways
	case *Profile:
		*x = ProfileReference
	case *AEADMode:
		*x = AEADRefuse
	case *packet.ReassemblyConfig:
		*x = packet.ReassemblyConfig{MaxMessageSize: 1 << 20, MaxReassemblies: 7, MaxPerRemote: 3, MaxBuffered: 1 << 22}
	case *slog.Logger:
		t.Fatalf("%s: unexpected by-value logger", name)
	case **slog.Logger:
		*x = slog.New(slog.DiscardHandler)
	case **packet.Registry:
		*x = packet.NewRegistry()
	case *CoatMaker:
		*x = twinCoat{}
	default:
		switch v.Kind() {
		case reflect.String:
			v.SetString(name)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int64:
			if v.Type().Name() == "Duration" {
				v.SetInt(int64(1000+i) * 1e6)
			} else {
				v.SetInt(int64(1000 + i))
			}
		case reflect.Uint8:
			v.SetUint(uint64(i + 1))
		case reflect.Float64:
			v.SetFloat(float64(1000 + i))
		case reflect.Interface:
			if reflect.TypeFor[*bytes.Buffer]().Implements(v.Type()) {
				v.Set(reflect.ValueOf(new(bytes.Buffer)))
				return
			}
			t.Fatalf("%s: no distinct value for %v; teach setDistinct", name, v.Type())
		default:
			t.Fatalf("%s: no distinct value for %v; teach setDistinct", name, v.Type())
		}
	}
}

// twinCoat is a CoatMaker that only stands for one in TestConfigTwins.
type twinCoat struct{}

func (twinCoat) Kind() codec.CoatKind { return codec.CoatKindNaCl }
func (twinCoat) Session(_, _ *[32]byte) (packet.Coat, error) {
	return nil, nil
}
