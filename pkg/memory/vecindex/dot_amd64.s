//go:build amd64 && !purego

#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// n is a multiple of 8. Four accumulators over 32 floats per pass hide the
// FMA latency; a last loop takes the remaining groups of 8.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-32, DX

loop32:
	CMPQ AX, DX
	JGE  loop8
	VMOVUPS (SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7
	VFMADD231PS (DI)(AX*4), Y4, Y0
	VFMADD231PS 32(DI)(AX*4), Y5, Y1
	VFMADD231PS 64(DI)(AX*4), Y6, Y2
	VFMADD231PS 96(DI)(AX*4), Y7, Y3
	ADDQ $32, AX
	JMP  loop32

loop8:
	CMPQ AX, CX
	JGE  done
	VMOVUPS (SI)(AX*4), Y4
	VFMADD231PS (DI)(AX*4), Y4, Y0
	ADDQ $8, AX
	JMP  loop8

done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dot4AVX2(q, a, b, c, d *float32, n int) (ra, rb, rc, rd float32)
// n is a multiple of 16. q is loaded once per 16 floats for four products;
// two accumulators per product (Y1-Y8) hide the FMA latency.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), SI
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ d+32(FP), R11
	MOVQ n+40(FP), CX
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	XORQ AX, AX

loop16:
	CMPQ AX, CX
	JGE  reduce
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS 32(SI)(AX*4), Y9
	VFMADD231PS (R8)(AX*4), Y0, Y1
	VFMADD231PS 32(R8)(AX*4), Y9, Y5
	VFMADD231PS (R9)(AX*4), Y0, Y2
	VFMADD231PS 32(R9)(AX*4), Y9, Y6
	VFMADD231PS (R10)(AX*4), Y0, Y3
	VFMADD231PS 32(R10)(AX*4), Y9, Y7
	VFMADD231PS (R11)(AX*4), Y0, Y4
	VFMADD231PS 32(R11)(AX*4), Y9, Y8
	ADDQ $16, AX
	JMP  loop16

reduce:
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VADDPS Y8, Y4, Y4

	VEXTRACTF128 $1, Y1, X5
	VADDPS X5, X1, X1
	VHADDPS X1, X1, X1
	VHADDPS X1, X1, X1

	VEXTRACTF128 $1, Y2, X6
	VADDPS X6, X2, X2
	VHADDPS X2, X2, X2
	VHADDPS X2, X2, X2

	VEXTRACTF128 $1, Y3, X7
	VADDPS X7, X3, X3
	VHADDPS X3, X3, X3
	VHADDPS X3, X3, X3

	VEXTRACTF128 $1, Y4, X8
	VADDPS X8, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4

	// Clear the upper halves before the SSE stores (no AVX-SSE transition).
	VZEROUPPER
	MOVSS X1, ra+48(FP)
	MOVSS X2, rb+52(FP)
	MOVSS X3, rc+56(FP)
	MOVSS X4, rd+60(FP)
	RET
