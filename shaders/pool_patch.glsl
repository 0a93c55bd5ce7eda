// Shared by the patch fold's kernels (conv2d_pool_forward, conv2d_pool_weight; ops/conv2d_pool.h):
// the geometry of pairs of pooled outputs, the input patch under a pair, and where a pair's
// codes lie. Include after conv_geometry.glsl and conv_tap.glsl (x, xw, FORMAT_X).
#ifndef BRIGADE_SHADERS_POOL_PATCH_GLSL
#define BRIGADE_SHADERS_POOL_PATCH_GLSL

layout(constant_id = 11) const uint IC = 1;
layout(constant_id = 12) const uint OC = 4;

const uint POH = OH / 2u, POW = OW / 2u, PAIRS = POW / 2u;
// The patch under a pair: two convolution rows of four outputs, every input channel.
const uint PATCH_H = SH + KH, PATCH_W = 3u * SW + KW, PATCH = IC * PATCH_H * PATCH_W;

// Sample n's patch under pair `pair` of pooled row py, zero in the padding: element
// (c * PATCH_H + r) * PATCH_W + k is x[n][c][2 py SH - PH + r][4 pair SW - PW + k].
void load_patch(uint n, uint py, uint pair, out float under[PATCH]) {
  const int ih0 = int(2u * py * SH) - int(PH), iw0 = int(4u * pair * SW) - int(PW);
  [[unroll]] for (uint c = 0u; c < IC; ++c) {
    const uint plane = (n * IC + c) * H * W;
    [[unroll]] for (uint r = 0u; r < PATCH_H; ++r)
      [[unroll]] for (uint k = 0u; k < PATCH_W; ++k)
        under[(c * PATCH_H + r) * PATCH_W + k] = tap(plane, ih0 + int(r), iw0 + int(k));
  }
}

// The word of codes of pair `pair` of sample n's pooled row py holding channel oc's byte
// (byte oc % 4; the even output's code in its low four bits).
uint code_word(uint n, uint py, uint pair, uint oc) { return ((n * POH + py) * PAIRS + pair) * (OC / 4u) + oc / 4u; }

#endif
