//! Times as users store them: ISO 8601 text (with or without a zone; none
//! means UTC), Unix seconds (integer or decimal), or what PostgreSQL prints
//! for its native types in the ISO date style. Everything becomes
//! milliseconds since the Unix epoch, UTC.

/// Milliseconds since 1970-01-01T00:00:00Z.
pub type Millis = i64;

/// Parses ISO 8601 text or Unix seconds.
pub fn parse(text: &str) -> Result<Millis, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("an empty time".into());
    }
    if looks_numeric(t) {
        return unix_seconds(t);
    }
    iso8601(t)
}

fn looks_numeric(t: &str) -> bool {
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().any(|c| c.is_ascii_digit())
        && digits.matches('.').count() <= 1
}

fn unix_seconds(t: &str) -> Result<Millis, String> {
    let bad = || format!("{t:?} is not Unix seconds in range");
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let millis = fraction_millis(frac);
    let total = whole
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(millis))
        .ok_or_else(bad)?;
    Ok(if negative { -total } else { total })
}

/// The first three digits of a decimal fraction, as milliseconds (truncated).
fn fraction_millis(frac: &str) -> i64 {
    frac.bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |acc, b| acc * 10 + i64::from(b - b'0'))
}

/// A cursor over the ASCII text of a time.
struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let part = self.s.get(self.at..self.at + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.at += n;
        Some(part.iter().fold(0, |acc, b| acc * 10 + i64::from(b - b'0')))
    }

    fn eat(&mut self, options: &[u8]) -> Option<u8> {
        let c = *self.s.get(self.at)?;
        if options.contains(&c) {
            self.at += 1;
            Some(c)
        } else {
            None
        }
    }

    fn done(&self) -> bool {
        self.at == self.s.len()
    }
}

fn iso8601(t: &str) -> Result<Millis, String> {
    let bad = |why: &str| {
        format!("{t:?} is not an ISO 8601 time like 2026-11-02T09:15:00Z, nor Unix seconds ({why})")
    };
    let mut c = Cursor {
        s: t.as_bytes(),
        at: 0,
    };
    let year = c.digits(4).ok_or_else(|| bad("no YYYY-MM-DD date"))?;
    c.eat(b"-").ok_or_else(|| bad("no YYYY-MM-DD date"))?;
    let month = c.digits(2).ok_or_else(|| bad("no YYYY-MM-DD date"))?;
    c.eat(b"-").ok_or_else(|| bad("no YYYY-MM-DD date"))?;
    let day = c.digits(2).ok_or_else(|| bad("no YYYY-MM-DD date"))?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    let (mut hour, mut minute, mut second, mut millis) = (0, 0, 0, 0);
    let mut offset_minutes = 0;
    if !c.done() {
        c.eat(b"Tt ")
            .ok_or_else(|| bad("expected T or a space after the date"))?;
        hour = c
            .digits(2)
            .ok_or_else(|| bad("expected HH:MM after the date"))?;
        c.eat(b":")
            .ok_or_else(|| bad("expected HH:MM after the date"))?;
        minute = c
            .digits(2)
            .ok_or_else(|| bad("expected HH:MM after the date"))?;
        if c.eat(b":").is_some() {
            second = c
                .digits(2)
                .ok_or_else(|| bad("expected seconds after HH:MM:"))?;
            if c.eat(b".,").is_some() {
                let start = c.at;
                while c.digits(1).is_some() {}
                if c.at == start {
                    return Err(bad("expected digits after the decimal point"));
                }
                millis = fraction_millis(&t[start..c.at]);
            }
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(bad("no such time of day"));
        }
        c.eat(b" ");
        if c.eat(b"Zz").is_none() && !c.done() {
            let sign = match c.eat(b"+-") {
                Some(b'-') => -1,
                Some(_) => 1,
                None => return Err(bad("unexpected text after the time")),
            };
            let oh = c
                .digits(2)
                .ok_or_else(|| bad("expected a zone like Z, +02 or +02:00"))?;
            let om = if c.eat(b":").is_some() {
                c.digits(2)
                    .ok_or_else(|| bad("expected a zone like Z, +02 or +02:00"))?
            } else {
                c.digits(2).unwrap_or(0)
            };
            if oh > 23 || om > 59 {
                return Err(bad("no such zone offset"));
            }
            offset_minutes = sign * (oh * 60 + om);
        }
        if !c.done() {
            return Err(bad("unexpected text after the time"));
        }
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// RFC 3339 in UTC: `2026-11-02T09:15:00Z`, with `.mmm` when there are milliseconds.
pub fn format(ms: Millis) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, frac) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    if frac == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:03}Z")
    }
}

/// A gap for people: `250ms`, `1.5s`, `40s`, `4m 10s`, `2h`, `2h 5s`, `1d 3h`.
pub fn format_gap(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 && ms % 1000 != 0 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let s = ms / 1000;
    let parts = [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "m"),
        (if s >= 86_400 { 0 } else { s % 60 }, "s"),
    ];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if text.is_empty() {
        "0s".to_owned()
    } else {
        text.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Millis = 1_793_610_900_000; // 2026-11-02T09:15:00Z

    #[test]
    fn iso_8601_with_every_zone_form() {
        for text in [
            "2026-11-02T09:15:00Z",
            "2026-11-02t09:15:00z",
            "2026-11-02 09:15:00",
            "2026-11-02T09:15",
            "2026-11-02T09:15:00+00",
            "2026-11-02 09:15:00+00",
            "2026-11-02T10:15:00+01:00",
            "2026-11-02T10:15:00+0100",
            "2026-11-02T04:15:00-05:00",
            "2026-11-02 09:15:00 +00:00",
            "  2026-11-02T09:15:00Z\n",
        ] {
            assert_eq!(parse(text), Ok(T), "{text}");
        }
    }

    #[test]
    fn fractions_and_dates() {
        assert_eq!(parse("2026-11-02T09:15:00.25Z"), Ok(T + 250));
        assert_eq!(parse("2026-11-02T09:15:00,123456Z"), Ok(T + 123));
        assert_eq!(parse("2026-11-02 09:15:00.5+00"), Ok(T + 500));
        assert_eq!(parse("2026-11-02"), Ok(T - (9 * 3600 + 15 * 60) * 1000));
        assert_eq!(parse("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse("2024-02-29T00:00:00Z"), Ok(1_709_164_800_000));
    }

    #[test]
    fn unix_seconds_integer_and_decimal() {
        assert_eq!(parse("1793610900"), Ok(T));
        assert_eq!(parse("1793610900.5"), Ok(T + 500));
        assert_eq!(parse("1793610900.0"), Ok(T));
        assert_eq!(parse("-1.5"), Ok(-1500));
        assert_eq!(parse("0"), Ok(0));
    }

    #[test]
    fn what_is_not_a_time_is_named() {
        for text in [
            "",
            "yesterday",
            "2026-13-02T09:15:00Z",
            "2026-02-30",
            "2026-11-02T25:00:00Z",
            "2026-11-02T09:15:00+2",
            "2026-11-02T09:15:00Z trailing",
            "02/11/2026",
            "1.2.3",
            "99999999999999999999",
            "infinity",
        ] {
            let err = parse(text).unwrap_err();
            assert!(!err.is_empty(), "{text}");
        }
        assert!(parse("yesterday").unwrap_err().contains("ISO 8601"));
    }

    #[test]
    fn formats_round_trip() {
        for ms in [0, T, T + 250, -86_400_000, 951_782_400_000] {
            assert_eq!(parse(&format(ms)), Ok(ms), "{}", format(ms));
        }
        assert_eq!(format(T), "2026-11-02T09:15:00Z");
        assert_eq!(format(T + 7), "2026-11-02T09:15:00.007Z");
    }

    #[test]
    fn gaps_for_people() {
        assert_eq!(format_gap(250), "250ms");
        assert_eq!(format_gap(40_000), "40s");
        assert_eq!(format_gap(1_500), "1.5s");
        assert_eq!(format_gap(250_000), "4m 10s");
        assert_eq!(format_gap(7_205_000), "2h 5s");
        assert_eq!(format_gap(7_200_000), "2h");
        assert_eq!(format_gap(97_230_000), "1d 3h");
    }
}
