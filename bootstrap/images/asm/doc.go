// Package asm owns osd's hand-assembled static x86-64 Linux executables, each a few
// hundred bytes of machine code in one ELF segment, so that neither a toolchain nor a
// registry is needed for them: the pod sandbox's pause process (PauseBinary, the entrypoint
// of images.PauseImage) and the guest test image's as-root helper (AsRootBinary, which its
// sudo runs). The bytes are x86-64 whatever GOARCH osd itself was built for.
package asm
