//! The node's per-request work on its HTTP loop thread: parsing an ingest
//! request (head and a 1 KiB body) and writing its 202.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use goad::node::http::request::{parse, Parsed};
use goad::node::http::{ChunkedProgress, Response};

fn ingest_request() -> Vec<u8> {
    let body = vec![b'x'; 1_024];
    let mut raw = format!(
        "POST /v1/sources/stripe/hooks HTTP/1.1\r\nhost: goad\r\ncontent-type: application/json\r\nuser-agent: Stripe/1.0\r\nstripe-signature: t=1,v1=abc\r\nidempotency-key: evt_1\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    raw
}

fn http(c: &mut Criterion) {
    let raw = ingest_request();
    let mut group = c.benchmark_group("node_http");
    group.throughput(Throughput::Elements(1));
    group.bench_function("parse_ingest_request", |b| {
        b.iter(|| {
            match parse(
                std::hint::black_box(&raw),
                1 << 20,
                &mut ChunkedProgress::default(),
            ) {
                Parsed::Complete(request, used) => (request.body.len(), used),
                other => panic!("{other:?}"),
            }
        })
    });
    let accepted = Response::json(
        202,
        &serde_json::json!({"id": "01a22bcc-7d70-72ef-a0d9-4513b0ab4147"}),
    );
    let mut out = Vec::with_capacity(256);
    group.bench_function("write_202", |b| {
        b.iter(|| {
            out.clear();
            accepted.write_to(&mut out, true);
            out.len()
        })
    });
    group.finish();
}

criterion_group!(benches, http);
criterion_main!(benches);
