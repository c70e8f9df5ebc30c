//! Money as integer micro-dollars, so budget sums and comparisons are exact in both stores.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// US dollars in millionths. Costs reported by agents are fractions of a cent; floats would make
/// `spent + reserved <= budget` wobble across thousands of additions.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Usd(pub i64);

impl Usd {
    pub const ZERO: Usd = Usd(0);

    /// Rounds to the nearest micro-dollar; negative, NaN and infinite inputs become zero.
    pub fn from_f64(dollars: f64) -> Usd {
        if !dollars.is_finite() || dollars <= 0.0 {
            return Usd(0);
        }
        Usd((dollars * 1_000_000.0).round() as i64)
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    pub fn micros(self) -> i64 {
        self.0
    }
}

impl Add for Usd {
    type Output = Usd;
    fn add(self, rhs: Usd) -> Usd {
        Usd(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Usd {
    fn add_assign(&mut self, rhs: Usd) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for Usd {
    type Output = Usd;
    fn sub(self, rhs: Usd) -> Usd {
        Usd(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.as_f64();
        if v != 0.0 && v.abs() < 0.01 {
            write!(f, "${v:.4}")
        } else {
            write!(f, "${v:.2}")
        }
    }
}

/// Whether a claim that reserves `estimate` fits: `spent + reserved + estimate <= budget`.
/// With a zero estimate there must still be strictly some room left, so an exhausted plan
/// never hands out "free" tasks that will in fact cost money.
pub fn budget_allows(budget: Option<Usd>, spent: Usd, reserved: Usd, estimate: Usd) -> bool {
    match budget {
        None => true,
        Some(limit) => {
            let committed = spent + reserved;
            if estimate == Usd::ZERO {
                committed < limit
            } else {
                committed + estimate <= limit
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_display() {
        assert_eq!(Usd::from_f64(0.1234567), Usd(123_457));
        assert_eq!(Usd::from_f64(-1.0), Usd(0));
        assert_eq!(Usd::from_f64(f64::NAN), Usd(0));
        assert_eq!(Usd::from_f64(2.5).to_string(), "$2.50");
        assert_eq!(Usd::from_f64(0.0012).to_string(), "$0.0012");
    }

    #[test]
    fn budget_rule() {
        let b = Some(Usd::from_f64(1.0));
        assert!(budget_allows(None, Usd(9_999_999), Usd(0), Usd(1)));
        assert!(budget_allows(
            b,
            Usd::from_f64(0.5),
            Usd::from_f64(0.25),
            Usd::from_f64(0.25)
        ));
        assert!(!budget_allows(
            b,
            Usd::from_f64(0.5),
            Usd::from_f64(0.25),
            Usd::from_f64(0.26)
        ));
        assert!(budget_allows(b, Usd::from_f64(0.9), Usd(0), Usd(0)));
        assert!(!budget_allows(b, Usd::from_f64(1.0), Usd(0), Usd(0)));
    }
}
