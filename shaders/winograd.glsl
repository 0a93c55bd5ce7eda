// Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2016): a 2x2 tile of a 3x3 convolution's output is
//   Y = A^T [ (G g G^T) . (B^T d B) ] A
// for the 4x4 input patch d at stride 2 and the 3x3 filter g, with `.` elementwise:
// 16 multiplies where the direct sum takes 36. Over channels the elementwise products become
// 16 independent matrix products, one per point of the 4x4 tile (ops/conv2d_winograd.cpp).
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]    G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// Each function applies a transform to one row (or, stacked, one column) of a tile, so a
// tile is transformed as rows, then the results' columns.
// With conv_geometry.glsl included first, its geometry: an input of H x W planes padded by PH, PW and an
// output of OH x OW covered by TH x TW tiles of 2x2.
#ifndef BRIGADE_SHADERS_WINOGRAD_GLSL
#define BRIGADE_SHADERS_WINOGRAD_GLSL

// B^T applied to four values (input patches).
vec4 bt(vec4 d) { return vec4(d.x - d.z, d.y + d.z, d.z - d.y, d.y - d.w); }
// G applied to three values (filter taps).
vec4 g3(vec3 g) { return vec4(g.x, 0.5 * (g.x + g.y + g.z), 0.5 * (g.x - g.y + g.z), g.z); }
// A^T applied to four values (products back to outputs).
vec2 at(vec4 m) { return vec2(m.x + m.y + m.z, m.y - m.z - m.w); }
// The adjoints of A^T and G, for the gradients: A applied to two, G^T applied to four.
vec4 a2(vec2 e) { return vec4(e.x, e.x + e.y, e.x - e.y, -e.y); }
vec3 gt(vec4 u) { return vec3(u.x + 0.5 * (u.y + u.z), 0.5 * (u.y - u.z), 0.5 * (u.y + u.z) + u.w); }

#ifdef BRIGADE_CONV_GEOMETRY
const uint TH = (OH + 1u) / 2u, TW = (OW + 1u) / 2u, TILES = TH * TW;

// Element `at` (channel c, column zt) of point p's (channels, columns) matrix, in a
// buffer of the 16 points' matrices one after another. Column zt is tile zt % TILES of
// sample zt / TILES of the count the pass covers.
uint point_at(uint p, uint c, uint zt, uint channels, uint columns) { return (p * channels + c) * columns + zt; }
#endif

#endif
