//! A receiver slower than the attempt's deadline, though within the sink's
//! timeout in each phase of the request: the request is cut off by the
//! deadline, and its worker is not left stuck.

use super::*;

#[test]
fn a_receiver_slower_than_the_attempts_deadline_is_cut_off_by_it() {
    raw::assert_a_dripping_receiver_is_cut_off_by_the_deadline(
        |url, _| SinkConfig::http(format!("{url}/hooks")),
        raw::CUT_OFF,
    );
}
