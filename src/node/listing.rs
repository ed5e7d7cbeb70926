//! Pages of listings. Dead letters and replays are listed a page at a
//! time (`limit` items, `DEFAULT_PAGE` by default). The listings in
//! config order, `GET /v1/sources` and `GET /v1/sinks` (tens of MB at
//! 100,000 sinks), are whole without `limit`, as before they had pages.
//! Dead letters page by their stored position (see `dead_letters`); the
//! others by [`Paging`]: a page holds at most `limit` items and
//! `next_cursor`, its last item's key when more follow (else null), which
//! the next request passes as `cursor`. A cursor names an item, not a
//! place: after a reload or a replay that added or removed other items,
//! the next page still starts right after it; once the item itself is
//! gone (a reload removed it, a done replay was forgotten) the cursor is
//! stale (400 `bad_cursor`: list again from the start).

use super::admin::known_params;
use super::http::{Request, Response};

/// Listed items per page by default (dead letters, replays), and at most.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1_000;

/// The query parameters of paging, beside a listing's filters.
pub(super) const PAGING_PARAMS: [&str; 2] = ["limit", "cursor"];

/// A request's `limit` (none: everything) and `cursor`.
pub(super) struct Paging {
    limit: Option<usize>,
    after: Option<String>,
}

impl Paging {
    /// A listing whole without `limit`.
    pub(super) fn of(request: &Request) -> Result<Paging, Response> {
        let limit = limit(request)?;
        let after = request.query_param("cursor").filter(|c| !c.is_empty());
        Ok(Paging { limit, after })
    }

    /// A listing of `DEFAULT_PAGE` items without `limit`.
    pub(super) fn paged(request: &Request) -> Result<Paging, Response> {
        let paging = Paging::of(request)?;
        Ok(Paging {
            limit: Some(paging.limit.unwrap_or(DEFAULT_PAGE)),
            ..paging
        })
    }

    /// The page of `items` (the whole listing, filtered, in order) and the
    /// next page's cursor; `key` names an item as a cursor does.
    pub(super) fn page<T>(
        &self,
        items: Vec<T>,
        key: impl Fn(&T) -> String,
    ) -> Result<(Vec<T>, Option<String>), Response> {
        let start = match &self.after {
            None => 0,
            Some(cursor) => match items.iter().position(|item| key(item) == *cursor) {
                Some(at) => at + 1,
                None => {
                    return Err(Response::error(
                        400,
                        "bad_cursor",
                        &format!(
                            "cursor {cursor:?} names nothing this listing holds (it is gone since, or the filters changed): list again from the start"
                        ),
                    ))
                }
            },
        };
        let mut page: Vec<T> = items.into_iter().skip(start).collect();
        let next = match self.limit {
            Some(limit) if page.len() > limit => {
                page.truncate(limit);
                page.last().map(key)
            }
            _ => None,
        };
        Ok((page, next))
    }
}

/// A request to a listing of sources or sinks: its filters (`source_id`,
/// `tenant`) and its page.
pub(super) struct SourceListing {
    source_id: Option<String>,
    tenant: Option<String>,
    pub(super) paging: Paging,
}

impl SourceListing {
    /// 400 for a parameter it does not take, or a bad limit.
    pub(super) fn of(request: &Request) -> Result<SourceListing, Response> {
        known_params(
            request,
            &[&["source_id", "tenant"][..], &PAGING_PARAMS].concat(),
        )?;
        let param = |name| request.query_param(name).filter(|v| !v.is_empty());
        Ok(SourceListing {
            source_id: param("source_id"),
            tenant: param("tenant"),
            paging: Paging::of(request)?,
        })
    }

    /// Whether the filters take a source's (or its sink's) item.
    pub(super) fn takes(&self, source_id: &str, tenant: &str) -> bool {
        self.source_id.as_deref().is_none_or(|id| id == source_id)
            && self.tenant.as_deref().is_none_or(|t| t == tenant)
    }
}

/// A listing's `limit`: `DEFAULT_PAGE` when absent.
pub(super) fn page_limit(request: &Request) -> Result<usize, Response> {
    Ok(limit(request)?.unwrap_or(DEFAULT_PAGE))
}

/// The request's `limit`, if any; 400 `bad_limit` outside 1 to `MAX_PAGE`.
fn limit(request: &Request) -> Result<Option<usize>, Response> {
    let Some(text) = request.query_param("limit") else {
        return Ok(None);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(Some(n)),
        _ => Err(Response::error(
            400,
            "bad_limit",
            &format!("limit must be an integer from 1 to {MAX_PAGE}, got {text:?}"),
        )),
    }
}
