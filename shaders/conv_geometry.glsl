// The convolution's geometry as specialization constants, set by ops/conv2d.cpp from the
// shape (the push constants carry the same values): every division by a size or stride and
// every tap loop is then over constants. With push constants, a division whose operands
// differ between lanes becomes one scalar division per lane on CPU devices.
#define BRIGADE_CONV_GEOMETRY
layout(constant_id = 1) const uint H = 1;
layout(constant_id = 2) const uint W = 1;
layout(constant_id = 3) const uint OH = 1;
layout(constant_id = 4) const uint OW = 1;
layout(constant_id = 5) const uint KH = 1;
layout(constant_id = 6) const uint KW = 1;
layout(constant_id = 7) const uint SH = 1;
layout(constant_id = 8) const uint SW = 1;
layout(constant_id = 9) const uint PH = 0;
layout(constant_id = 10) const uint PW = 0;
