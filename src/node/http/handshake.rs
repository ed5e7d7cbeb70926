//! TLS handshakes off the loop thread. The loop reads a client's hello
//! without blocking; a pool of signer threads answers it (the key exchange
//! and the signature with the certificate's key: about a millisecond with
//! an RSA 2048 key, during which a loop doing it would serve no other
//! connection, and which on one thread would cap new connections at about
//! a thousand a second however many cores the node has); the loop then
//! writes the answer and finishes the handshake, whose rest is cheap.

use crossbeam_channel::{Receiver, Sender};
use rustls::server::{Accepted, AcceptedAlert, Acceptor};
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::sync::Arc;

/// Where a connection's TLS stands.
pub(super) enum Tls {
    /// Reading the client's hello.
    Hello(Box<Acceptor>),
    /// A signer thread is answering the hello.
    Signing,
    /// The server's answer made: the handshake finishes and the session
    /// carries the requests.
    Session(Box<ServerConnection>),
}

/// What reading a client's hello came to.
pub(super) enum Hello {
    /// More bytes are needed.
    Partial,
    /// The hello is whole.
    Whole(Box<Accepted>),
    /// The client closed or sent something else (it was told, when it
    /// can be): close the connection.
    Refused,
}

/// Reads what the socket has into `acceptor` until the hello is whole or
/// the socket would block.
pub(super) fn read_hello(acceptor: &mut Acceptor, socket: &mut (impl Read + Write)) -> Hello {
    loop {
        match acceptor.read_tls(socket) {
            Ok(0) => return Hello::Refused,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Hello::Partial,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Hello::Refused,
        }
        match acceptor.accept() {
            Ok(None) => {}
            Ok(Some(accepted)) => return Hello::Whole(Box::new(accepted)),
            Err((_, mut alert)) => {
                let _ = alert.write_all(socket);
                return Hello::Refused;
            }
        }
    }
}

/// A connection: its slot and its id (a slot is reused).
pub(super) type Target = (usize, u64);

/// A hello answered: the session, or the alert to send (if any) before
/// closing.
pub(super) type Answered = (Target, Result<ServerConnection, Option<AcceptedAlert>>);

struct Job {
    target: Target,
    accepted: Box<Accepted>,
    config: Arc<ServerConfig>,
}

/// The signer threads. They exit once this is dropped.
pub(super) struct Signers {
    jobs: Sender<Job>,
}

impl Signers {
    /// One thread per core, at least two (so one slow signature holds no
    /// other) and at most eight. Each answer goes to `answered`, then
    /// `wake` is called.
    pub(super) fn start(
        answered: Sender<Answered>,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> io::Result<Signers> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
        // Bounded by the connections: one hello each at most.
        let (jobs, queue) = crossbeam_channel::unbounded::<Job>();
        for n in 0..threads {
            let (queue, answered, wake) = (queue.clone(), answered.clone(), wake.clone());
            std::thread::Builder::new()
                .name(format!("goad-tls-{n}"))
                .spawn(move || sign(&queue, &answered, wake.as_ref()))?;
        }
        Ok(Signers { jobs })
    }

    /// Answers `accepted` with `config` on a signer thread.
    pub(super) fn answer(
        &self,
        target: Target,
        accepted: Box<Accepted>,
        config: Arc<ServerConfig>,
    ) {
        let _ = self.jobs.send(Job {
            target,
            accepted,
            config,
        });
    }
}

fn sign(queue: &Receiver<Job>, answered: &Sender<Answered>, wake: &(dyn Fn() + Send + Sync)) {
    while let Ok(job) = queue.recv() {
        // A panic in rustls fails this handshake, not the pool: the job's
        // state goes with it.
        let result = match crate::panics::catch(|| job.accepted.into_connection(job.config)) {
            Ok(Ok(session)) => Ok(session),
            Ok(Err((_, alert))) => Err(Some(alert)),
            Err(_) => Err(None),
        };
        let _ = answered.send((job.target, result));
        wake();
    }
}

#[cfg(test)]
mod tests {
    use super::super::server::{Handler, Later, Server};
    use super::super::{Request, Response};
    use crate::config::HttpConfig;
    use crate::pem::{certificates, private_key};
    use crate::test_support::{fixture, test_ca_client};
    use crossbeam_channel::{Receiver, Sender};
    use parking_lot::RwLock;
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::server::{ClientHello, ResolvesServerCert};
    use rustls::sign::{CertifiedKey, Signer, SigningKey};
    use rustls::{ClientConnection, ServerConfig, SignatureAlgorithm};
    use rustls::{SignatureScheme, StreamOwned};
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// The test certificate's key, whose first signature waits: it says
    /// so on `started`, then waits for `release`.
    #[derive(Debug)]
    struct HeldFirst {
        key: Arc<dyn SigningKey>,
        held: Arc<AtomicBool>,
        started: Sender<()>,
        release: Receiver<()>,
    }

    impl SigningKey for HeldFirst {
        fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
            let inner = self.key.choose_scheme(offered)?;
            Some(Box::new(HeldSigner {
                inner,
                first: !self.held.swap(true, Ordering::SeqCst),
                started: self.started.clone(),
                release: self.release.clone(),
            }))
        }

        fn algorithm(&self) -> SignatureAlgorithm {
            self.key.algorithm()
        }
    }

    #[derive(Debug)]
    struct HeldSigner {
        inner: Box<dyn Signer>,
        first: bool,
        started: Sender<()>,
        release: Receiver<()>,
    }

    impl Signer for HeldSigner {
        fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
            if self.first {
                let _ = self.started.send(());
                let _ = self.release.recv();
            }
            self.inner.sign(message)
        }

        fn scheme(&self) -> SignatureScheme {
            self.inner.scheme()
        }
    }

    #[derive(Debug)]
    struct Resolver(Arc<CertifiedKey>);

    impl ResolvesServerCert for Resolver {
        fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    struct Fine;

    impl Handler for Fine {
        fn handle(&self, request: Request, _: Later<'_>) -> Option<Response> {
            Some(Response::text(200, "text/plain", request.path))
        }
    }

    /// GET `path` over a new TLS connection to `addr`, trusting the test
    /// CA; the answer's text, or the error of a connection that got none
    /// within 10 s.
    fn get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<String> {
        let config = test_ca_client(crate::tls_provider::tls_provider());
        let name = ServerName::try_from("localhost").unwrap();
        let tls = ClientConnection::new(config, name).unwrap();
        let socket = std::net::TcpStream::connect(addr)?;
        socket.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut stream = StreamOwned::new(tls, socket);
        let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes())?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// A handshake whose signature takes long holds neither the loop nor
    /// other handshakes: while the first connection's signature waits, a
    /// second connection shakes hands and is answered; the first is
    /// answered once its signature is made.
    #[test]
    fn a_slow_signature_holds_no_other_connection() {
        let (started, started_rx) = crossbeam_channel::unbounded();
        let (release, release_rx) = crossbeam_channel::unbounded();
        let key = private_key(&fixture("localhost-key.pem")).unwrap();
        let key = HeldFirst {
            key: rustls::crypto::aws_lc_rs::sign::any_supported_type(&key).unwrap(),
            held: Arc::new(AtomicBool::new(false)),
            started,
            release: release_rx,
        };
        let chain: Vec<CertificateDer<'static>> =
            certificates(&fixture("localhost-cert.pem")).unwrap();
        let certified = Arc::new(CertifiedKey::new(chain, Arc::new(key)));
        let provider = crate::tls_provider::tls_provider();
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Resolver(certified)));
        let tls = Arc::new(RwLock::new(Arc::new(config)));
        let addr = "127.0.0.1:0".parse().unwrap();
        let server = Server::bind(
            addr,
            HttpConfig::default(),
            Some(tls),
            1_024,
            Arc::new(Fine),
            Arc::default(),
        )
        .unwrap();
        let addr = server.local_addr().unwrap();
        let stopper = server.stopper();
        let loop_thread = std::thread::spawn(move || server.run());

        let first = std::thread::spawn(move || get(addr, "/first"));
        started_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the first handshake is being signed");
        let second = get(addr, "/second").expect("the second connection is answered");
        assert!(second.starts_with("HTTP/1.1 200 "), "{second}");
        assert!(second.ends_with("/second"), "{second}");
        release.send(()).unwrap();
        let first = first.join().unwrap().expect("the first is answered");
        assert!(first.ends_with("/first"), "{first}");
        stopper.stop();
        loop_thread.join().unwrap().unwrap();
    }
}
