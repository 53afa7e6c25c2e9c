package tiny

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// GGUF v3 constants (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
const (
	ggufMagic   = 0x46554747 // "GGUF" little-endian
	ggufVersion = 3
	// Alignment is the tensor data alignment (general.alignment's default).
	Alignment = 32
)

// GGUF metadata value types.
const (
	typeUint8   uint32 = 0
	typeInt8    uint32 = 1
	typeUint16  uint32 = 2
	typeInt16   uint32 = 3
	typeUint32  uint32 = 4
	typeInt32   uint32 = 5
	typeFloat32 uint32 = 6
	typeBool    uint32 = 7
	typeString  uint32 = 8
	typeArray   uint32 = 9
	typeUint64  uint32 = 10
	typeInt64   uint32 = 11
	typeFloat64 uint32 = 12
)

// ggmlTypeF32 is the ggml tensor type of 32-bit floats.
const ggmlTypeF32 = 0

// KV is one metadata entry. Value is one of: uint32, int32, float32, bool,
// string, uint64, []string, []int32, []float32.
type KV struct {
	Key   string
	Value any
}

// Tensor is one F32 tensor. Dims are in ggml order (ne0 first: the length of
// a row). Data holds the product of Dims values, rows one after the other.
type Tensor struct {
	Name string
	Dims []uint64
	Data []float32
}

func (t Tensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// dataOffsets returns each tensor's offset in the data section (aligned) and
// the data section's total size.
func dataOffsets(tensors []Tensor) ([]uint64, uint64) {
	offs := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		offs[i] = off
		off = align(off + 4*t.elements())
	}
	return offs, off
}

func align(n uint64) uint64 { return (n + Alignment - 1) / Alignment * Alignment }

// WriteGGUF writes a GGUF v3 file: header, metadata, tensor infos, padding to
// Alignment, then each tensor's data padded to Alignment.
func WriteGGUF(w io.Writer, kvs []KV, tensors []Tensor) error {
	for _, t := range tensors {
		if len(t.Dims) == 0 || len(t.Dims) > 4 {
			return fmt.Errorf("tensor %s: %d dimensions", t.Name, len(t.Dims))
		}
		if uint64(len(t.Data)) != t.elements() {
			return fmt.Errorf("tensor %s: %d values for dims %v", t.Name, len(t.Data), t.Dims)
		}
	}
	cw := &countWriter{w: bufio.NewWriter(w)}
	e := &encoder{w: cw}
	e.u32(ggufMagic)
	e.u32(ggufVersion)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.value(kv.Key, kv.Value)
	}
	offs, _ := dataOffsets(tensors)
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(ggmlTypeF32)
		e.u64(offs[i])
	}
	e.pad()
	for _, t := range tensors {
		buf := make([]byte, 4*len(t.Data))
		for i, v := range t.Data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		e.bytes(buf)
		e.pad()
	}
	if e.err != nil {
		return e.err
	}
	return cw.w.(*bufio.Writer).Flush()
}

type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

type encoder struct {
	w   *countWriter
	err error
}

func (e *encoder) bytes(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u32(v uint32) { e.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.bytes(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func (e *encoder) pad() {
	if n := align(e.w.n) - e.w.n; n > 0 {
		e.bytes(make([]byte, n))
	}
}

func (e *encoder) value(key string, v any) {
	switch v := v.(type) {
	case uint32:
		e.u32(typeUint32)
		e.u32(v)
	case int32:
		e.u32(typeInt32)
		e.u32(uint32(v))
	case float32:
		e.u32(typeFloat32)
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(typeBool)
		if v {
			e.bytes([]byte{1})
		} else {
			e.bytes([]byte{0})
		}
	case string:
		e.u32(typeString)
		e.str(v)
	case uint64:
		e.u32(typeUint64)
		e.u64(v)
	case []string:
		e.u32(typeArray)
		e.u32(typeString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []int32:
		e.u32(typeArray)
		e.u32(typeInt32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []float32:
		e.u32(typeArray)
		e.u32(typeFloat32)
		e.u64(uint64(len(v)))
		for _, x := range v {
			e.u32(math.Float32bits(x))
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("metadata %s: unsupported type %T", key, v)
		}
	}
}

// File is a decoded GGUF file (header, metadata and tensor infos); ReadGGUF
// exists to check what WriteGGUF wrote.
type File struct {
	Version    uint32
	KV         map[string]any
	Keys       []string // metadata keys in file order
	Tensors    []TensorInfo
	DataOffset uint64 // absolute offset of the data section
}

// TensorInfo describes one tensor of a decoded file.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   uint32
	Offset uint64 // relative to DataOffset
}

// ErrFormat reports a file that is not a well-formed GGUF v3 file.
var ErrFormat = errors.New("gguf: malformed file")

// ReadGGUF decodes the header, metadata and tensor infos of a GGUF v3 file
// held in b. Sizes are bounded by len(b), so hostile input cannot make it
// allocate much.
func ReadGGUF(b []byte) (*File, error) {
	d := &decoder{b: b}
	if d.u32() != ggufMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	f := &File{Version: d.u32(), KV: map[string]any{}}
	if d.err == nil && f.Version != ggufVersion {
		return nil, fmt.Errorf("%w: version %d", ErrFormat, f.Version)
	}
	nt, nkv := d.u64(), d.u64()
	if d.err == nil && (nt > uint64(len(b)) || nkv > uint64(len(b))) {
		return nil, fmt.Errorf("%w: counts %d/%d", ErrFormat, nt, nkv)
	}
	for i := uint64(0); i < nkv && d.err == nil; i++ {
		k := d.str()
		v := d.value(d.u32(), 0)
		if d.err == nil {
			f.KV[k] = v
			f.Keys = append(f.Keys, k)
		}
	}
	for i := uint64(0); i < nt && d.err == nil; i++ {
		ti := TensorInfo{Name: d.str()}
		n := d.u32()
		if n > 4 {
			d.fail("tensor %s: %d dims", ti.Name, n)
			break
		}
		for j := uint32(0); j < n; j++ {
			ti.Dims = append(ti.Dims, d.u64())
		}
		ti.Type = d.u32()
		ti.Offset = d.u64()
		f.Tensors = append(f.Tensors, ti)
	}
	if d.err != nil {
		return nil, d.err
	}
	f.DataOffset = align(uint64(d.off))
	if f.DataOffset > uint64(len(b)) {
		return nil, fmt.Errorf("%w: data section past the end", ErrFormat)
	}
	return f, nil
}

// TensorData returns the F32 values of tensor ti of f, decoded from b.
func (f *File) TensorData(b []byte, ti TensorInfo) ([]float32, error) {
	n := uint64(1)
	for _, dim := range ti.Dims {
		if dim == 0 || dim > uint64(len(b)) || n > uint64(len(b)) {
			return nil, fmt.Errorf("%w: tensor %s dims %v", ErrFormat, ti.Name, ti.Dims)
		}
		n *= dim
	}
	start := f.DataOffset + ti.Offset
	if ti.Type != ggmlTypeF32 || n > uint64(len(b)) || start > uint64(len(b)) || uint64(len(b))-start < 4*n {
		return nil, fmt.Errorf("%w: tensor %s out of range", ErrFormat, ti.Name)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[start+4*uint64(i):]))
	}
	return out, nil
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
	}
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("truncated at %d", d.off)
		return nil
	}
	p := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(d.u64())) }

func (d *decoder) value(typ uint32, depth int) any {
	switch typ {
	case typeUint8:
		return d.u8()
	case typeInt8:
		return int8(d.u8())
	case typeUint16:
		p := d.take(2)
		if p == nil {
			return nil
		}
		return binary.LittleEndian.Uint16(p)
	case typeInt16:
		p := d.take(2)
		if p == nil {
			return nil
		}
		return int16(binary.LittleEndian.Uint16(p))
	case typeUint32:
		return d.u32()
	case typeInt32:
		return int32(d.u32())
	case typeFloat32:
		return math.Float32frombits(d.u32())
	case typeBool:
		return d.u8() != 0
	case typeString:
		return d.str()
	case typeUint64:
		return d.u64()
	case typeInt64:
		return int64(d.u64())
	case typeFloat64:
		return math.Float64frombits(d.u64())
	case typeArray:
		if depth > 2 {
			d.fail("arrays nested too deep")
			return nil
		}
		et, n := d.u32(), d.u64()
		if n > uint64(len(d.b)-d.off) {
			d.fail("array of %d past the end", n)
			return nil
		}
		out := make([]any, 0, min(n, 1024))
		for i := uint64(0); i < n && d.err == nil; i++ {
			out = append(out, d.value(et, depth+1))
		}
		return out
	default:
		d.fail("value type %d", typ)
		return nil
	}
}
