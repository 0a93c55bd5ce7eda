// Winograd's minimal filtering F(m x m, 3x3) (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016), m = TILE (2 or 4): an m x m tile of a 3x3
// convolution's output is
//   Y = A^T [ (G g G^T) . (B^T d B) ] A
// for the input patch d of ALPHA x ALPHA (ALPHA = m + 2) at stride m and the 3x3 filter g,
// with `.` elementwise: ALPHA^2 multiplies (16 for m = 2, 36 for m = 4) where the direct sum
// takes 9 m^2 (36, 144). Over channels the elementwise products become ALPHA^2 independent
// matrix products, one per point of the tile (ops/conv2d_winograd.cpp). The matrices are
// Lavin's: for m = 2, interpolation points 0, 1, -1 and infinity,
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// and for m = 4, points 0, 1, -1, 2, -2 and infinity,
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// Each function applies a transform to one row (or one column) of a tile, written out so
// that no coefficient 0 is multiplied: a tile is transformed as rows, then the results'
// columns. Vectors are float[6], of which the first ALPHA, TILE or 3 count.
// With conv_geometry.glsl included first, its geometry: an input of H x W planes padded by
// PH, PW and an output of OH x OW covered by TH x TW tiles.
#ifndef BRIGADE_SHADERS_WINOGRAD_GLSL
#define BRIGADE_SHADERS_WINOGRAD_GLSL

layout(constant_id = 15) const uint TILE = 2;
const uint ALPHA = TILE + 2u, POINTS = ALPHA * ALPHA;

// B^T applied to ALPHA values (an input patch's row or column).
float[6] bt(float d[6]) {
  if (TILE == 2u) return float[6](d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3], 0.0, 0.0);
  return float[6](4.0 * d[0] - 5.0 * d[2] + d[4], d[3] + d[4] - 4.0 * (d[1] + d[2]),
                  4.0 * (d[1] - d[2]) + d[4] - d[3], 2.0 * (d[3] - d[1]) + d[4] - d[2],
                  2.0 * (d[1] - d[3]) + d[4] - d[2], 4.0 * d[1] - 5.0 * d[3] + d[5]);
}
// G applied to three values (a filter's row or column).
float[6] g3(float g[6]) {
  if (TILE == 2u) return float[6](g[0], 0.5 * (g[0] + g[1] + g[2]), 0.5 * (g[0] - g[1] + g[2]), g[2], 0.0, 0.0);
  return float[6](0.25 * g[0], -(g[0] + g[1] + g[2]) / 6.0, -(g[0] - g[1] + g[2]) / 6.0,
                  g[0] / 24.0 + g[1] / 12.0 + g[2] / 6.0, g[0] / 24.0 - g[1] / 12.0 + g[2] / 6.0, g[2]);
}
// A^T applied to ALPHA values (products back to TILE outputs).
float[6] at(float m[6]) {
  if (TILE == 2u) return float[6](m[0] + m[1] + m[2], m[1] - m[2] - m[3], 0.0, 0.0, 0.0, 0.0);
  return float[6](m[0] + m[1] + m[2] + m[3] + m[4], m[1] - m[2] + 2.0 * (m[3] - m[4]),
                  m[1] + m[2] + 4.0 * (m[3] + m[4]), m[1] - m[2] + 8.0 * (m[3] - m[4]) + m[5], 0.0, 0.0);
}
// The adjoints, for the gradients: A applied to TILE values (ALPHA out), B and G^T below.
float[6] a_(float e[6]) {
  if (TILE == 2u) return float[6](e[0], e[0] + e[1], e[0] - e[1], -e[1], 0.0, 0.0);
  return float[6](e[0], e[0] + e[1] + e[2] + e[3], e[0] - e[1] + e[2] - e[3],
                  e[0] + 2.0 * e[1] + 4.0 * e[2] + 8.0 * e[3], e[0] - 2.0 * e[1] + 4.0 * e[2] - 8.0 * e[3], e[3]);
}
// B applied to ALPHA values (the adjoint of the input transform: an input gradient's patch).
float[6] b_(float e[6]) {
  if (TILE == 2u) return float[6](e[0], e[1] - e[2] + e[3], e[1] + e[2] - e[0], -e[3], 0.0, 0.0);
  return float[6](4.0 * e[0], 4.0 * (e[2] - e[1] + e[5]) + 2.0 * (e[4] - e[3]),
                  -5.0 * e[0] - 4.0 * (e[1] + e[2]) - e[3] - e[4], e[1] - e[2] + 2.0 * (e[3] - e[4]) - 5.0 * e[5],
                  e[0] + e[1] + e[2] + e[3] + e[4], e[5]);
}
float[6] gt(float u[6]) {
  if (TILE == 2u)
    return float[6](u[0] + 0.5 * (u[1] + u[2]), 0.5 * (u[1] - u[2]), 0.5 * (u[1] + u[2]) + u[3], 0.0, 0.0, 0.0);
  return float[6](0.25 * u[0] - (u[1] + u[2]) / 6.0 + (u[3] + u[4]) / 24.0, (u[2] - u[1]) / 6.0 + (u[3] - u[4]) / 12.0,
                  (u[3] + u[4] - u[1] - u[2]) / 6.0 + u[5], 0.0, 0.0, 0.0);
}

#ifdef BRIGADE_CONV_GEOMETRY
const uint TH = (OH + TILE - 1u) / TILE, TW = (OW + TILE - 1u) / TILE, TILES = TH * TW;

// Element (channel c, column zt) of point p's (channels, columns) matrix, in a buffer of the
// points' matrices one after another. Column zt is tile zt % TILES of sample zt / TILES of
// the count the pass covers.
uint point_at(uint p, uint c, uint zt, uint channels, uint columns) { return (p * channels + c) * columns + zt; }
#endif

#endif
