//go:build amd64 && !purego

#include "textflag.h"

// HSUMPS leaves the sum of the eight floats of Y in the low lane of X (X
// is Y's lower half; T is clobbered).
#define HSUMPS(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VHADDPS X, X, X; \
	VHADDPS X, X, X

// HSUMD moves the sum of the eight int32 of Y into the 32-bit register R
// (X is Y's lower half; T is clobbered).
#define HSUMD(Y, X, T, R) \
	VEXTRACTI128 $1, Y, T; \
	VPADDD T, X, X; \
	VPSHUFD $0x4E, X, T; \
	VPADDD T, X, X; \
	VPSHUFD $0xB1, X, T; \
	VPADDD T, X, X; \
	VMOVD X, R

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
	HSUMPS(Y0, X0, X1)
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

	HSUMPS(Y1, X1, X5)
	HSUMPS(Y2, X2, X6)
	HSUMPS(Y3, X3, X7)
	HSUMPS(Y4, X4, X8)

	// Clear the upper halves before the SSE stores (no AVX-SSE transition).
	VZEROUPPER
	MOVSS X1, ra+48(FP)
	MOVSS X2, rb+52(FP)
	MOVSS X3, rc+56(FP)
	MOVSS X4, rd+60(FP)
	RET

// func dotI8AVX2(a, b *int8, n int) int32
// n is a multiple of 16: sixteen int8 of each side are widened to int16
// (VPMOVSXBW), multiplied and summed in pairs into eight int32
// (VPMADDWD), two accumulators.
TEXT ·dotI8AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-32, DX

i8loop32:
	CMPQ AX, DX
	JGE  i8loop16
	VPMOVSXBW (SI)(AX*1), Y2
	VPMOVSXBW (DI)(AX*1), Y3
	VPMADDWD Y3, Y2, Y2
	VPADDD Y2, Y0, Y0
	VPMOVSXBW 16(SI)(AX*1), Y4
	VPMOVSXBW 16(DI)(AX*1), Y5
	VPMADDWD Y5, Y4, Y4
	VPADDD Y4, Y1, Y1
	ADDQ $32, AX
	JMP  i8loop32

i8loop16:
	CMPQ AX, CX
	JGE  i8done
	VPMOVSXBW (SI)(AX*1), Y2
	VPMOVSXBW (DI)(AX*1), Y3
	VPMADDWD Y3, Y2, Y2
	VPADDD Y2, Y0, Y0
	ADDQ $16, AX
	JMP  i8loop16

i8done:
	VPADDD Y1, Y0, Y0
	HSUMD(Y0, X0, X1, AX)
	VZEROUPPER
	MOVL AX, ret+24(FP)
	RET

// func dot4I8AVX2(q, a, b, c, d *int8, n int) (ra, rb, rc, rd int32)
// n is a multiple of 16: each pass widens sixteen int8 of q once and
// multiplies them with those of a, b, c and d (four accumulators, four
// streams of cache misses in flight).
TEXT ·dot4I8AVX2(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), SI
	MOVQ a+8(FP), R8
	MOVQ b+16(FP), R9
	MOVQ c+24(FP), R10
	MOVQ d+32(FP), R11
	MOVQ n+40(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	XORQ AX, AX

q8loop:
	CMPQ AX, CX
	JGE  q8done
	VPMOVSXBW (SI)(AX*1), Y4
	VPMOVSXBW (R8)(AX*1), Y5
	VPMOVSXBW (R9)(AX*1), Y6
	VPMOVSXBW (R10)(AX*1), Y7
	VPMOVSXBW (R11)(AX*1), Y8
	VPMADDWD Y4, Y5, Y5
	VPMADDWD Y4, Y6, Y6
	VPMADDWD Y4, Y7, Y7
	VPMADDWD Y4, Y8, Y8
	VPADDD Y5, Y0, Y0
	VPADDD Y6, Y1, Y1
	VPADDD Y7, Y2, Y2
	VPADDD Y8, Y3, Y3
	ADDQ $16, AX
	JMP  q8loop

q8done:
	HSUMD(Y0, X0, X4, AX)
	HSUMD(Y1, X1, X4, BX)
	HSUMD(Y2, X2, X4, DX)
	HSUMD(Y3, X3, X4, DI)

	VZEROUPPER
	MOVL AX, ra+48(FP)
	MOVL BX, rb+52(FP)
	MOVL DX, rc+56(FP)
	MOVL DI, rd+60(FP)
	RET
