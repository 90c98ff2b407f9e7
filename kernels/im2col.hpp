#pragma once
// 3x3 convolutions (stride 1, zero padding 1) as products: im2col lays each output
// pixel's 3x3 neighbourhood of an NHWC image out as one row, so a convolution is
// cols (B H W, 9 C) x weight (9 C, C_out), and its input gradient is col2im of
// dcols = dz weight^T. Column index (ky * 3 + kx) * C + c.
#include "core/tensor.hpp"

namespace strata::kernels {

// cols (B*H*W, 9*C) from x (B, H, W, C) row-major. One thread per output pixel, so the
// index arithmetic is done once per pixel and neighbour, not per value.
template <class T>
void im2col_3x3(V2<T> cols, const T* x, int64_t b, int64_t h, int64_t w, int64_t c) {
  Kokkos::parallel_for(
      "im2col_3x3", Range(0, b * h * w), KOKKOS_LAMBDA(const int64_t row) {
        const int64_t px = row % w, py = row / w % h, img = row / (w * h);
        T* out = &cols(row, 0);
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t sy = py + ky - 1, sx = px + kx - 1;
            T* dst = out + (ky * 3 + kx) * c;
            if (sy >= 0 && sy < h && sx >= 0 && sx < w) {
              const T* src = x + ((img * h + sy) * w + sx) * c;
              for (int64_t ch = 0; ch < c; ++ch) dst[ch] = src[ch];
            } else {
              for (int64_t ch = 0; ch < c; ++ch) dst[ch] = T(0);
            }
          }
      });
}

// dx (B, H, W, C) += scale * col2im(dcols): each input pixel gathers the columns that
// read it (no write conflicts).
template <class T>
void col2im_3x3_add(T* dx, V2<const T> dcols, int64_t b, int64_t h, int64_t w, int64_t c, T scale) {
  Kokkos::parallel_for(
      "col2im_3x3", Range(0, b * h * w), KOKKOS_LAMBDA(const int64_t pixel) {
        const int64_t px = pixel % w, py = pixel / w % h, img = pixel / (w * h);
        T* d = dx + pixel * c;
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t oy = py - ky + 1, ox = px - kx + 1;  // the output pixel that read this one at (ky, kx)
            if (oy < 0 || oy >= h || ox < 0 || ox >= w) continue;
            const T* src = &dcols((img * h + oy) * w + ox, (ky * 3 + kx) * c);
            for (int64_t ch = 0; ch < c; ++ch) d[ch] += scale * src[ch];
          }
      });
}

}  // namespace strata::kernels
