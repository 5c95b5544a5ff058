//! QUIC (raw): quinn over loopback, TLS 1.3 with a self-signed certificate
//! made at start-up (rcgen), ALPN set, one bidirectional stream per round
//! trip carrying the vote's fields as raw bytes — no schema layer, which is
//! this row's point: what the transport alone costs.

use super::Transport;
use crate::vote::VoteData;
use anyhow::{anyhow, ensure, Context, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ClientConfig, Connection, Endpoint, ServerConfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::runtime::{Builder, Runtime};

const ALPN: &[u8] = b"workbench-vote";
/// Largest reply accepted: a vote with the largest payload of the size sweep, and room.
const MAX_MESSAGE: usize = 2 << 20;

/// The fixed fields in order, then the payload: 145 + payload bytes.
fn pack(v: &VoteData, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&v.round.to_le_bytes());
    out.extend_from_slice(&v.block_hash);
    out.extend_from_slice(&v.voter_id);
    out.extend_from_slice(&v.signature);
    out.extend_from_slice(&v.timestamp.to_le_bytes());
    out.push(v.vote_type);
    out.extend_from_slice(&v.payload);
}

fn check(bytes: &[u8], e: &VoteData, scratch: &mut Vec<u8>) -> Result<()> {
    pack(e, scratch);
    ensure!(
        bytes == &scratch[..],
        "raw vote differs from the expected one ({} bytes vs {})",
        bytes.len(),
        scratch.len()
    );
    Ok(())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn configs() -> Result<(ServerConfig, ClientConfig)> {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
    let cert = CertificateDer::from(key.cert.der().to_vec());
    let pkey = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
    let mut server = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], pkey)?;
    server.alpn_protocols = vec![ALPN.to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert)?;
    let mut client = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![ALPN.to_vec()];
    Ok((
        ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(server)?)),
        ClientConfig::new(Arc::new(QuicClientConfig::try_from(client)?)),
    ))
}

async fn serve(endpoint: Endpoint, seed: u64, payload: usize) -> Result<u64> {
    let conn = endpoint.accept().await.context("no connection")?.await?;
    let (mut expect, mut scratch) = (VoteData::with_payload(payload), Vec::new());
    let mut n = 0;
    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
        let req = recv.read_to_end(MAX_MESSAGE).await?;
        expect.set(seed, n);
        n += 1;
        check(&req, &expect, &mut scratch)?;
        // The reply is the expected vote, packed again (`check` packed it into
        // `scratch`), as every server encodes its reply; not an echo.
        send.write_all(&scratch).await?;
        send.finish()?;
    }
    Ok(n)
}

pub struct Quic {
    rt: Option<Runtime>,
    conn: Option<Connection>,
    endpoint: Option<Endpoint>,
    server: Option<JoinHandle<()>>,
    buf: Vec<u8>,
}

impl Transport for Quic {
    const ID: registry::Transport = registry::Transport::Quic;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let (server_cfg, client_cfg) = configs()?;
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<Result<SocketAddr>>();
        let server = super::spawn_server(move || {
            let rt = match Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => return drop(addr_tx.send(Err(e.into()))),
            };
            rt.block_on(async move {
                let ep = match Endpoint::server(server_cfg, SocketAddr::from(([127, 0, 0, 1], 0))) {
                    Ok(ep) => ep,
                    Err(e) => return drop(addr_tx.send(Err(e.into()))),
                };
                let _ = addr_tx.send(ep.local_addr().map_err(Into::into));
                let _ = serve(ep.clone(), seed, payload).await;
                ep.wait_idle().await;
            });
        });
        let addr = addr_rx.recv().map_err(|_| anyhow!("QUIC server thread ended"))??;
        let rt = Builder::new_current_thread().enable_all().build()?;
        let (endpoint, conn) = rt.block_on(async {
            let mut ep = Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0)))?;
            ep.set_default_client_config(client_cfg);
            let conn = ep.connect(addr, "localhost")?.await?;
            anyhow::Ok((ep, conn))
        })?;
        Ok(Quic { rt: Some(rt), conn: Some(conn), endpoint: Some(endpoint), server: Some(server), buf: Vec::new() })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let (Some(rt), Some(conn)) = (&self.rt, &self.conn) else { anyhow::bail!("transport closed") };
        pack(v, &mut self.buf);
        let buf = &self.buf;
        let reply = rt.block_on(async {
            let (mut send, mut recv) = conn.open_bi().await?;
            send.write_all(buf).await?;
            send.finish()?;
            anyhow::Ok(recv.read_to_end(MAX_MESSAGE).await?)
        })?;
        ensure!(reply == self.buf, "echo differs from the vote sent");
        Ok(())
    }
}

impl Drop for Quic {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.close(0u32.into(), b"done");
        }
        if let (Some(rt), Some(ep)) = (&self.rt, &self.endpoint) {
            rt.block_on(ep.wait_idle());
        }
        self.endpoint.take();
        self.rt.take();
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}
