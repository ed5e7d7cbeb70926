//! Claims in an S3-compatible bucket: object `<prefix><tenant>/<sha256>`,
//! path-style (`{endpoint}/{bucket}/{key}`), requests signed with SigV4 for
//! service `s3` (credentials as `claim_check.credentials` says). A check-in asks for the object first (`HEAD`) and writes it
//! (`PUT`) only when it is missing or older than half the retention, so a
//! body is uploaded once and a claim that is still in use stays fresh. The
//! bucket's lifecycle rule deletes old claims: goad does not list buckets.

use crate::sink::aws_credentials::AwsCredentials;
use crate::sink::aws_xml;
use crate::sink::client::{
    failed_answer, request_timeout, send_past_stale_connections, transport_error, Client,
};
use crate::sink::sigv4::{sign_headers, Unsigned};
use std::io;
use std::time::{Duration, Instant, SystemTime};
use ureq::RequestExt as _;

/// Idle connections a bucket client keeps (check-ins come from the IO
/// workers of every shard).
const IDLE_CONNECTIONS: usize = 16;

/// Where and how claims are stored in a bucket.
#[derive(Debug, Clone)]
pub struct S3Options {
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub prefix: String,
    pub credentials: AwsCredentials,
    pub timeout_ms: u64,
}

/// A bucket of claims.
pub struct S3Bucket {
    options: S3Options,
    client: Client,
}

impl std::fmt::Debug for S3Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Bucket")
            .field("options", &self.options)
            .finish()
    }
}

/// The most of an error answer kept for the error's message.
const MAX_ERROR_BODY_BYTES: u64 = 4 * 1024;

impl S3Bucket {
    pub fn new(options: S3Options) -> S3Bucket {
        S3Bucket {
            client: Client::for_aws(options.timeout_ms, IDLE_CONNECTIONS),
            options,
        }
    }

    /// The credentials its requests are signed with.
    pub(crate) fn credentials(&self) -> &AwsCredentials {
        &self.options.credentials
    }

    fn object_url(&self, tenant: &str, sha256: &str) -> String {
        let o = &self.options;
        format!(
            "{}/{}/{}{tenant}/{sha256}",
            o.endpoint.trim_end_matches('/'),
            o.bucket,
            o.prefix
        )
    }

    /// One signed request, ended a little past `deadline` if given; the
    /// status, the `Last-Modified` header and the body (read up to
    /// `max_body_bytes`).
    fn call(
        &self,
        method: &str,
        url: &str,
        body: &[u8],
        max_body_bytes: u64,
        deadline: Option<Instant>,
    ) -> io::Result<(u16, Option<String>, Vec<u8>)> {
        let unsigned = Unsigned {
            method,
            url,
            headers: &[],
            body,
        };
        let o = &self.options;
        let signed = sign_headers(
            &o.credentials,
            &o.region,
            "s3",
            &unsigned,
            SystemTime::now(),
            deadline,
        )
        .map_err(io::Error::other)?;
        let mut request = ureq::http::Request::builder().method(method).uri(url);
        for (name, value) in &signed {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request.body(body).map_err(io::Error::other)?;
        let response = send_past_stale_connections(|| {
            request
                .clone()
                .with_agent(self.client.agent(url))
                .configure()
                .timeout_global(deadline.and_then(request_timeout))
                .build()
                .run()
        })
        .map_err(|e| io::Error::other(transport_error(e)))?;
        let status = response.status().as_u16();
        let modified = response
            .headers()
            .get("last-modified")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response
            .into_body()
            .with_config()
            .limit(max_body_bytes)
            .read_to_vec()
            .map_err(io::Error::other)?;
        Ok((status, modified, body))
    }

    /// Stores `body` as the claim of `tenant`/`sha256` unless a copy newer
    /// than half of `retention` is there, by `deadline` if given.
    pub fn check_in(
        &self,
        tenant: &str,
        sha256: &str,
        body: &[u8],
        retention: Duration,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        let url = self.object_url(tenant, sha256);
        let (status, modified, _) = self.call("HEAD", &url, &[], 0, deadline)?;
        let fresh_after = SystemTime::now().checked_sub(retention / 2);
        let fresh = status == 200
            && modified
                .and_then(|m| httpdate::parse_http_date(&m).ok())
                .zip(fresh_after)
                .is_some_and(|(at, after)| at > after);
        if fresh {
            return Ok(());
        }
        let (status, _, answer) = self.call("PUT", &url, body, MAX_ERROR_BODY_BYTES, deadline)?;
        match status {
            200..=299 => Ok(()),
            _ => Err(failed("PUT", status, &answer)),
        }
    }

    /// The claim's body; `None` when the bucket has no such object (a
    /// bucket that is not there is an error: S3 answers 404 for both).
    pub fn get(&self, tenant: &str, sha256: &str, max_bytes: u64) -> io::Result<Option<Vec<u8>>> {
        let url = self.object_url(tenant, sha256);
        let (status, _, body) = self.call("GET", &url, &[], max_bytes, None)?;
        match status {
            200 => Ok(Some(body)),
            404 if aws_xml::code(&body) != Some("NoSuchBucket") => Ok(None),
            _ => Err(failed("GET", status, &body)),
        }
    }
}

/// An S3 answer that is not a success, as an error.
fn failed(method: &str, status: u16, answer: &[u8]) -> io::Error {
    io::Error::other(format!(
        "S3 {method} answered {}",
        failed_answer(status, answer)
    ))
}
