//===- HalfFloat.cpp - 16-bit floats on the host -----------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/DeviceCheck.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace lina::reference {

size_t elementBytes(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// bfloat16, round to nearest even (what __float2bfloat16_rn does).
uint16_t floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep it a quiet NaN
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds half to even; a carry out
  // of the mantissa correctly bumps the exponent (up to infinity).
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t half) { return bitsFloat(uint32_t(half) << 16); }

/// Rounds the `shift` low bits off `significand`, to nearest even.
uint32_t shiftRoundEven(uint32_t significand, int shift) {
  uint32_t kept = significand >> shift;
  uint32_t rest = significand & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1u)))
    ++kept;
  return kept;
}

/// IEEE binary16, round to nearest even, with subnormals, overflow to
/// infinity and NaN (what __float2half_rn does).
uint16_t floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)
    return sign | 0x7E00u;
  // 65520 is halfway between 65504 (the largest half) and 65536; the tie
  // goes to the even neighbour, which is infinity.
  if (magnitude >= 0x477FF000u)
    return sign | 0x7C00u;
  if (magnitude >= 0x38800000u) { // normal in half: |x| >= 2^-14
    uint32_t rebiased = magnitude - ((127u - 15u) << 23);
    // A carry out of the 10 mantissa bits lands in the exponent, as it must.
    return sign | static_cast<uint16_t>(shiftRoundEven(rebiased, 13));
  }
  if (magnitude < 0x33000000u) // below 2^-25: rounds to zero
    return sign;
  // Subnormal: count units of 2^-24. x = significand * 2^(e - 150), so the
  // count is significand * 2^(e - 126) with e in [102, 112].
  uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  int exponent = static_cast<int>(magnitude >> 23);
  return sign |
         static_cast<uint16_t>(shiftRoundEven(significand, 126 - exponent));
}

float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1Fu;
  uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1Fu)
    return bitsFloat(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24); // exact
    return sign ? -magnitude : magnitude;
  }
  return bitsFloat(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
}

/// Checks the conversions above on every 16-bit pattern: each finite value
/// survives a round trip, and the midpoint between neighbours rounds to the
/// even one. A wrong conversion would blame the kernel for the harness's
/// error, so the suite refuses to run without this.
bool conversionsAreExact(std::string &why) {
  struct Format {
    const char *name;
    uint16_t (*encode)(float);
    float (*decode)(uint16_t);
  };
  const Format formats[] = {{"bf16", floatToBf16, bf16ToFloat},
                            {"f16", floatToHalf, halfToFloat}};
  for (const Format &f : formats) {
    for (uint32_t pattern = 0; pattern < 0x7FFFu; ++pattern) {
      auto bits = static_cast<uint16_t>(pattern);
      float value = f.decode(bits), next = f.decode(bits + 1);
      if (!std::isfinite(value) || !std::isfinite(next))
        break; // the positive finite range is exhausted
      // The midpoint of two neighbours needs one more bit than they do, so
      // it is a float; just below it rounds down, just above it up.
      auto even = static_cast<uint16_t>((bits & 1u) ? bits + 1 : bits);
      float mid = static_cast<float>((double(value) + double(next)) / 2);
      float below = std::nextafter(mid, 0.0f);
      float above = std::nextafter(mid, INFINITY);
      if (f.encode(value) != bits || f.encode(-value) != (bits | 0x8000u) ||
          f.encode(mid) != even || f.encode(below) != bits ||
          f.encode(above) != bits + 1) {
        char text[128];
        std::snprintf(text, sizeof(text),
                      "%s conversion is wrong at pattern 0x%04x", f.name,
                      unsigned(bits));
        why = text;
        return false;
      }
    }
  }
  return true;
}


/// A quiet NaN in `dtype`, little-endian: a value the kernel never wrote
/// turns the relative error into infinity.
std::vector<uint8_t> nanPattern(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return {0xC0, 0x7F}; // 0x7FC0
  case DType::F16:
    return {0x00, 0x7E}; // 0x7E00
  case DType::F32:
    break;
  }
  return {0x00, 0x00, 0xC0, 0x7F}; // 0x7FC00000
}

/// Encodes `values` in `dtype` and replaces each by the value it encodes to,
/// so the reference computes on exactly the numbers the kernel reads. bf16
/// and f16 round the fp32 value, as a framework's .to(dtype) would.
std::vector<uint8_t> encodeInPlace(std::vector<double> &values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * elementBytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    float single = static_cast<float>(values[i]);
    if (dtype == DType::F32) {
      std::memcpy(&bytes[4 * i], &single, 4);
      values[i] = single;
      continue;
    }
    uint16_t half =
        dtype == DType::BF16 ? floatToBf16(single) : floatToHalf(single);
    std::memcpy(&bytes[2 * i], &half, 2);
    values[i] = dtype == DType::BF16 ? bf16ToFloat(half) : halfToFloat(half);
  }
  return bytes;
}

std::vector<double> decode(const uint8_t *bytes, size_t count, DType dtype) {
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::F32) {
      float single;
      std::memcpy(&single, bytes + 4 * i, 4);
      values[i] = single;
      continue;
    }
    uint16_t half;
    std::memcpy(&half, bytes + 2 * i, 2);
    values[i] = dtype == DType::BF16 ? bf16ToFloat(half) : halfToFloat(half);
  }
  return values;
}


} // namespace lina::reference
