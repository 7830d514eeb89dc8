package asm

import (
	"encoding/binary"
	"fmt"
)

// Linux x86-64 syscall numbers and constants used by the pause program.
const (
	sysRtSigaction = 13
	sysRtSigreturn = 15
	sysPause       = 34
	sysExitGroup   = 231

	sigINT  = 2
	sigTERM = 15
	sigCHLD = 17

	saRestorer = 0x04000000 // SA_RESTORER: x86-64 refuses to deliver a handled signal without one
	sigIgn     = 1          // SIG_IGN

	pauseBase   = 0x400000 // virtual address of file offset 0
	elfHdrSize  = 64
	progHdrSize = 56
)

// x86asm is a tiny forward-only assembler: raw bytes, labels and rel32/abs64
// fixups resolved by finish.
type x86asm struct {
	b      []byte
	labels map[string]int
	rel32  map[int]string // offset of a rel32 field -> label (relative to the field's end)
	abs64  map[int]string // offset of an abs64 field -> label (absolute virtual address)
}

func newX86asm() *x86asm {
	return &x86asm{labels: map[string]int{}, rel32: map[int]string{}, abs64: map[int]string{}}
}

func (a *x86asm) emit(b ...byte)    { a.b = append(a.b, b...) }
func (a *x86asm) label(name string) { a.labels[name] = len(a.b) }
func (a *x86asm) imm32(v uint32)    { a.b = binary.LittleEndian.AppendUint32(a.b, v) }
func (a *x86asm) u64(v uint64)      { a.b = binary.LittleEndian.AppendUint64(a.b, v) }

// movEAX emits `mov eax, imm32` (zero-extends into rax).
func (a *x86asm) movEAX(v uint32) { a.emit(0xB8); a.imm32(v) }

// movEDI emits `mov edi, imm32`.
func (a *x86asm) movEDI(v uint32) { a.emit(0xBF); a.imm32(v) }

// leaRSI emits `lea rsi, [rip+label]`.
func (a *x86asm) leaRSI(label string) {
	a.emit(0x48, 0x8D, 0x35)
	a.rel32[len(a.b)] = label
	a.imm32(0)
}

func (a *x86asm) syscall() { a.emit(0x0F, 0x05) }

// jmpBack emits a short `jmp label` to an already defined label.
func (a *x86asm) jmpBack(label string) {
	rel := a.labels[label] - (len(a.b) + 2)
	a.emit(0xEB, byte(int8(rel)))
}

// addr64 emits the absolute virtual address of label as a 64-bit word.
func (a *x86asm) addr64(label string) { a.abs64[len(a.b)] = label; a.u64(0) }

func (a *x86asm) align(n int) {
	for len(a.b)%n != 0 {
		a.emit(0x90) // nop; never executed
	}
}

// finish resolves fixups given the virtual address of the first byte.
func (a *x86asm) finish(vaddr uint64) ([]byte, error) {
	for off, l := range a.rel32 {
		target, ok := a.labels[l]
		if !ok {
			return nil, fmt.Errorf("undefined label %q", l)
		}
		binary.LittleEndian.PutUint32(a.b[off:], uint32(int32(target-(off+4))))
	}
	for off, l := range a.abs64 {
		target, ok := a.labels[l]
		if !ok {
			return nil, fmt.Errorf("undefined label %q", l)
		}
		binary.LittleEndian.PutUint64(a.b[off:], vaddr+uint64(target))
	}
	return a.b, nil
}

// pauseCode assembles the pause program:
//
//	rt_sigaction(SIGTERM, &exitAct, NULL, 8)
//	rt_sigaction(SIGINT,  &exitAct, NULL, 8)
//	rt_sigaction(SIGCHLD, &ignAct,  NULL, 8)  // PID 1 of a pod: children are reaped by the kernel
//	for (;;) pause();
//	onSignal:  exit_group(0)                   // never returns, so the restorer is never used
//	restorer:  rt_sigreturn()                  // still required: x86-64 needs SA_RESTORER to deliver
//
// exitAct and ignAct are the kernel's struct sigaction on x86-64:
// {handler, flags, restorer, mask} (four 64-bit words; the mask is 8 bytes).
func pauseCode(vaddr uint64) ([]byte, error) {
	a := newX86asm()
	a.leaRSI("exitAct")
	a.movEDI(sigTERM)
	a.emit(0x31, 0xD2) // xor edx, edx      (oldact = NULL)
	a.emit(0x41, 0xBA)
	a.imm32(8) // mov r10d, 8       (sizeof(sigset_t))
	a.movEAX(sysRtSigaction)
	a.syscall() // syscall keeps rsi, rdx, r10; clobbers rax, rcx, r11
	a.movEDI(sigINT)
	a.movEAX(sysRtSigaction)
	a.syscall()
	a.leaRSI("ignAct")
	a.movEDI(sigCHLD)
	a.movEAX(sysRtSigaction)
	a.syscall()
	a.label("loop")
	a.movEAX(sysPause)
	a.syscall()
	a.jmpBack("loop")
	a.label("onSignal")
	a.emit(0x31, 0xFF) // xor edi, edi
	a.movEAX(sysExitGroup)
	a.syscall()
	a.label("restorer")
	a.movEAX(sysRtSigreturn)
	a.syscall()
	a.align(8)
	a.label("exitAct")
	a.addr64("onSignal")
	a.u64(saRestorer)
	a.addr64("restorer")
	a.u64(0)
	a.label("ignAct")
	a.u64(sigIgn)
	a.u64(saRestorer)
	a.addr64("restorer")
	a.u64(0)
	return a.finish(vaddr)
}

// PauseBinary returns a complete static ELF64 x86-64 Linux executable (a few
// hundred bytes) that sleeps in pause(2) until SIGTERM or SIGINT, then exits 0.
// It is the process of the pod sandbox ("pause") container. The bytes are
// machine code for x86-64 whatever GOARCH osd itself was built for; images.PauseImage
// refuses other architectures.
func PauseBinary() []byte {
	code, err := pauseCode(pauseBase + elfHdrSize + progHdrSize)
	if err != nil {
		panic(err) // the program above is fixed; an error is a bug caught by the tests
	}
	return staticELF(code)
}

// staticELF wraps machine code (loaded at pauseBase+elfHdrSize+progHdrSize, where it
// starts) into a static ELF64 x86-64 executable of one read+execute segment.
func staticELF(code []byte) []byte {
	const codeOff = elfHdrSize + progHdrSize
	size := uint64(codeOff + len(code))
	le := binary.LittleEndian
	b := make([]byte, 0, size)
	// ELF header.
	b = append(b, 0x7F, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */, 0 /* SYSV ABI */)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, 2)                 // e_type ET_EXEC
	b = le.AppendUint16(b, 0x3E)              // e_machine EM_X86_64
	b = le.AppendUint32(b, 1)                 // e_version
	b = le.AppendUint64(b, pauseBase+codeOff) // e_entry
	b = le.AppendUint64(b, elfHdrSize)        // e_phoff
	b = le.AppendUint64(b, 0)                 // e_shoff
	b = le.AppendUint32(b, 0)                 // e_flags
	b = le.AppendUint16(b, elfHdrSize)        // e_ehsize
	b = le.AppendUint16(b, progHdrSize)       // e_phentsize
	b = le.AppendUint16(b, 1)                 // e_phnum
	b = le.AppendUint16(b, 64)                // e_shentsize
	b = le.AppendUint16(b, 0)                 // e_shnum
	b = le.AppendUint16(b, 0)                 // e_shstrndx
	// One PT_LOAD mapping the whole file read+execute at pauseBase.
	b = le.AppendUint32(b, 1)         // p_type PT_LOAD
	b = le.AppendUint32(b, 4|1)       // p_flags PF_R|PF_X
	b = le.AppendUint64(b, 0)         // p_offset
	b = le.AppendUint64(b, pauseBase) // p_vaddr
	b = le.AppendUint64(b, pauseBase) // p_paddr
	b = le.AppendUint64(b, size)      // p_filesz
	b = le.AppendUint64(b, size)      // p_memsz
	b = le.AppendUint64(b, 0x1000)    // p_align
	return append(b, code...)
}
