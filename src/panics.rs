//! Code that must not take its thread down with it — a host's sink or
//! `commit_then` callback, a shard's loop, an admin request — runs under
//! [`catch`]: a panic becomes an error carrying the panic's text, and the
//! caller decides what the failure means (a failed attempt, a logged line,
//! a shard restart, a 500).

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

/// Runs `f`; a panic in it is returned as its text. The caller must leave
/// no state half-changed by `f` in use afterwards (each caller says why it
/// does not).
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| message(&*panic).to_owned())
}

/// The text a panic was raised with.
fn message(panic: &(dyn Any + Send)) -> &str {
    if let Some(text) = panic.downcast_ref::<&'static str>() {
        text
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text
    } else {
        "a panic without a message"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_returned_as_its_text_and_a_value_as_itself() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| panic!("row {} claimed twice", 7)),
            Err::<(), _>("row 7 claimed twice".to_string())
        );
        assert_eq!(catch(|| panic!("fixed")), Err::<(), _>("fixed".to_string()));
        assert_eq!(
            catch(|| std::panic::panic_any(3u8)),
            Err::<(), _>("a panic without a message".to_string())
        );
    }
}
