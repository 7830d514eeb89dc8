package asm

import "encoding/binary"

// Linux x86-64 syscall numbers the as-root program uses.
const (
	sysExecve    = 59
	sysSetuid    = 105
	sysSetgid    = 106
	sysSetgroups = 116
)

// AsRootBinary returns a static ELF64 x86-64 Linux executable (about 200 bytes) that,
// installed set-user-ID root, makes every user and group ID root (setgroups, setgid,
// setuid) and executes argv[1] (an absolute path) with the arguments after it and the
// same environment; it exits 127 when it cannot. The guest test image's sudo runs it
// (its file mode restricts it to the login user's group): busybox, set-user-ID root
// as well, gives root up in every applet that does not need it, so none of its applets
// can serve as sudo.
func AsRootBinary() []byte {
	var c []byte
	var fails []int // offsets of rel8 fields that jump to fail
	emit := func(b ...byte) { c = append(c, b...) }
	movEAX := func(v uint32) { emit(0xB8); c = binary.LittleEndian.AppendUint32(c, v) }
	jumpFail := func(op byte) { emit(op, 0); fails = append(fails, len(c)-1) }
	emit(0x31, 0xFF)                   // xor edi, edi
	emit(0x31, 0xF6)                   // xor esi, esi
	movEAX(sysSetgroups)               // setgroups(0, NULL)
	emit(0x0F, 0x05)                   // syscall
	emit(0x31, 0xFF)                   // xor edi, edi
	movEAX(sysSetgid)                  // setgid(0)
	emit(0x0F, 0x05)                   // syscall
	emit(0x48, 0x85, 0xC0)             // test rax, rax
	jumpFail(0x75)                     // jnz fail
	emit(0x31, 0xFF)                   // xor edi, edi
	movEAX(sysSetuid)                  // setuid(0): real, effective and saved
	emit(0x0F, 0x05)                   // syscall
	emit(0x48, 0x85, 0xC0)             // test rax, rax
	jumpFail(0x75)                     // jnz fail
	emit(0x48, 0x8B, 0x0C, 0x24)       // mov rcx, [rsp]         (argc)
	emit(0x48, 0x83, 0xF9, 0x02)       // cmp rcx, 2
	jumpFail(0x72)                     // jb fail
	emit(0x48, 0x8D, 0x74, 0x24, 0x10) // lea rsi, [rsp+16]      (argv+1)
	emit(0x48, 0x8B, 0x3E)             // mov rdi, [rsi]         (argv[1])
	emit(0x48, 0x8D, 0x54, 0xCC, 0x10) // lea rdx, [rsp+rcx*8+16] (envp)
	movEAX(sysExecve)                  // execve(argv[1], argv+1, envp)
	emit(0x0F, 0x05)                   // syscall
	fail := len(c)
	emit(0xBF, 127, 0, 0, 0) // mov edi, 127
	movEAX(sysExitGroup)     // exit_group(127)
	emit(0x0F, 0x05)         // syscall
	for _, f := range fails {
		c[f] = byte(int8(fail - (f + 1)))
	}
	return staticELF(c)
}
