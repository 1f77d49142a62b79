//! C `long double` on x86-64: the x87 80-bit extended format, stored in 16
//! bytes (bindgen maps such fields to `u128`). Rust has no such type, so
//! values are converted by hand; f64 -> extended is exact, extended -> f64
//! rounds to nearest as C's cast does (for values in f64's range).

/// Reads an x87 extended value from its 16 little-endian bytes.
pub fn to_f64(bytes: [u8; 16]) -> f64 {
    let mantissa = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let se = u16::from_le_bytes([bytes[8], bytes[9]]);
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from(se & 0x7fff);
    if exp == 0 && mantissa == 0 {
        return 0.0 * sign;
    }
    if exp == 0x7fff {
        return if mantissa << 1 == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    // value = mantissa x 2^(exp - 16383 - 63); two steps keep the power finite.
    let e = exp - 16383 - 63;
    sign * (mantissa as f64) * 2f64.powi(e / 2) * 2f64.powi(e - e / 2)
}

/// Encodes `v` as an x87 extended value (16 bytes, little endian, the top
/// 6 bytes zero). Exact for every finite f64, infinities and NaN.
pub fn from_f64(v: f64) -> [u8; 16] {
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let mut out = [0u8; 16];
    let (e, m): (u16, u64) = match (exp, frac) {
        (0, 0) => (0, 0),
        (0x7ff, 0) => (0x7fff, 1 << 63),
        (0x7ff, _) => (0x7fff, (1 << 63) | (1 << 62)),
        (0, f) => {
            // Subnormal f64: normalise into the wider exponent range.
            let shift = f.leading_zeros() - 11; // bring the top bit to bit 52
            let m = (f << shift) << 11;
            ((1 - 1023 - shift as i32 + 16383) as u16, m)
        }
        (e, f) => ((e - 1023 + 16383) as u16, (1 << 63) | (f << 11)),
    };
    out[0..8].copy_from_slice(&m.to_le_bytes());
    out[8..10].copy_from_slice(&(e | sign).to_le_bytes());
    out
}

/// [`from_f64`] as the `u128` bindgen uses for `long double` fields.
pub fn u128_from_f64(v: f64) -> u128 {
    u128::from_le_bytes(from_f64(v))
}

/// [`to_f64`] of a bindgen `long double` field.
pub fn f64_from_u128(v: u128) -> f64 {
    to_f64(v.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for v in [
            0.0,
            -0.0,
            1.0,
            0.5,
            -3.25,
            1e-40,
            123456.789,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::INFINITY,
        ] {
            let back = to_f64(from_f64(v));
            assert_eq!(back.to_bits(), v.to_bits(), "{v}");
        }
        assert!(to_f64(from_f64(f64::NAN)).is_nan());
    }

    #[test]
    fn known_encoding_of_one() {
        // 1.0L = exponent 0x3fff, mantissa 0x8000000000000000.
        let b = from_f64(1.0);
        assert_eq!(&b[0..10], &[0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f]);
    }
}
