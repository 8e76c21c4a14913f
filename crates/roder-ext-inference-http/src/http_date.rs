//! HTTP-dates (RFC 9110 §5.6.7), the second form of `Retry-After`.
//!
//! A recipient must accept all three forms: IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
//! (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37
//! 1994`). The value comes from a server, so the parser works on
//! whitespace-separated tokens and never indexes into the text; anything it
//! does not recognise is `None`, and the caller falls back on its own
//! backoff.

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

/// The instant an HTTP-date names, if `value` is one.
pub(crate) fn parse_http_date(value: &str) -> Option<OffsetDateTime> {
    let tokens: Vec<&str> = value.split_whitespace().collect();
    match tokens.as_slice() {
        // IMF-fixdate: "Sun," "06" "Nov" "1994" "08:49:37" "GMT"
        [weekday, day, month, year, clock, "GMT"] if weekday.ends_with(',') => {
            build(year.parse().ok()?, month, day, clock)
        }
        // RFC 850: "Sunday," "06-Nov-94" "08:49:37" "GMT"
        [weekday, date, clock, "GMT"] if weekday.ends_with(',') => {
            let mut parts = date.split('-');
            let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() || year.len() != 2 {
                return None;
            }
            let short: i32 = year.parse().ok()?;
            // RFC 9110: a two-digit year more than 50 years in the future
            // is the most recent past year with those digits.
            let this_year = OffsetDateTime::now_utc().year();
            let mut full = this_year - this_year.rem_euclid(100) + short;
            if full > this_year + 50 {
                full -= 100;
            }
            build(full, month, day, clock)
        }
        // asctime: "Sun" "Nov" "6" "08:49:37" "1994"
        [_weekday, month, day, clock, year] => build(year.parse().ok()?, month, day, clock),
        _ => None,
    }
}

fn build(year: i32, month: &str, day: &str, clock: &str) -> Option<OffsetDateTime> {
    let month = month_of(month)?;
    let day: u8 = day.parse().ok()?;
    let mut parts = clock.split(':');
    let (hour, minute, second) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let time = Time::from_hms(
        hour.parse().ok()?,
        minute.parse().ok()?,
        second.parse().ok()?,
    )
    .ok()?;
    let date = Date::from_calendar_date(year, month, day).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_utc())
}

fn month_of(name: &str) -> Option<Month> {
    Some(match name {
        "Jan" => Month::January,
        "Feb" => Month::February,
        "Mar" => Month::March,
        "Apr" => Month::April,
        "May" => Month::May,
        "Jun" => Month::June,
        "Jul" => Month::July,
        "Aug" => Month::August,
        "Sep" => Month::September,
        "Oct" => Month::October,
        "Nov" => Month::November,
        "Dec" => Month::December,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn all_three_forms_are_read() {
        let expected = PrimitiveDateTime::new(
            Date::from_calendar_date(1994, Month::November, 6).unwrap(),
            Time::from_hms(8, 49, 37).unwrap(),
        )
        .assume_utc();
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(expected)
        );
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(expected));
        let rfc850 = parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT").unwrap();
        assert_eq!(
            (rfc850.month(), rfc850.day(), rfc850.hour()),
            (Month::November, 6, 8)
        );
        assert_eq!(rfc850.year().rem_euclid(100), 94);
    }

    #[test]
    fn other_text_is_not_a_date() {
        for value in [
            "",
            "120",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(value), None, "{value:?}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(value in "\\PC{0,64}") {
            let _ = parse_http_date(&value);
        }

        #[test]
        fn arbitrary_dates_round_trip(secs in 0i64..4_102_444_800) {
            let instant = OffsetDateTime::from_unix_timestamp(secs).unwrap();
            let weekday = instant.weekday().to_string();
            let month = instant.month().to_string();
            let text = format!(
                "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
                &weekday[..3],
                instant.day(),
                &month[..3],
                instant.year(),
                instant.hour(),
                instant.minute(),
                instant.second(),
            );
            prop_assert_eq!(parse_http_date(&text), Some(instant));
        }
    }
}
