//! JSON-RPC 2.0 over HTTP/1.1 with hyper: one keep-alive connection, a POST
//! per call, serde_json bodies (the `json-rpc` codec), as hyper's users
//! write a client and server.

use super::Transport;
use crate::codecs::json::JsonRpc;
use crate::codecs::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::{anyhow, ensure, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::cell::RefCell;
use std::rc::Rc;
use std::thread::JoinHandle;
use tokio::runtime::{Builder, Runtime};

struct State {
    seed: u64,
    next: u64,
    expect: VoteData,
    codec: JsonRpc,
}

async fn handle(req: Request<Incoming>, state: Rc<RefCell<State>>) -> Result<Response<Full<Bytes>>> {
    let body = req.into_body().collect().await?.to_bytes();
    let mut guard = state.borrow_mut();
    let s = &mut *guard;
    s.expect.set(s.seed, s.next);
    s.next += 1;
    let reply = match s.codec.decode(&body, &s.expect, Envelope::Request) {
        Ok(()) => Response::builder()
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(s.codec.encode(&s.expect, Envelope::Response)?.to_vec())))?,
        Err(e) => Response::builder().status(StatusCode::BAD_REQUEST).body(Full::new(Bytes::from(e.to_string())))?,
    };
    Ok(reply)
}

pub struct JsonHttp {
    rt: Option<Runtime>,
    sender: Option<SendRequest<Full<Bytes>>>,
    codec: JsonRpc,
    server: Option<JoinHandle<()>>,
}

impl Transport for JsonHttp {
    const ID: registry::Transport = registry::Transport::JsonHttp;

    fn start(seed: u64, payload: usize) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let server = super::spawn_server(move || {
            let Some((rt, sock)) = super::accept_one(listener) else { return };
            rt.block_on(async move {
                let Ok(sock) = tokio::net::TcpStream::from_std(sock) else { return };
                let state = Rc::new(RefCell::new(State {
                    seed,
                    next: 0,
                    expect: VoteData::with_payload(payload),
                    codec: JsonRpc::new(),
                }));
                let svc = hyper::service::service_fn(move |req| handle(req, state.clone()));
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(sock), svc).await;
            });
        });
        let rt = Builder::new_current_thread().enable_all().build()?;
        let sender = rt.block_on(async {
            let sock = tokio::net::TcpStream::connect(addr).await?;
            sock.set_nodelay(true)?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(sock)).await?;
            tokio::spawn(conn);
            anyhow::Ok(sender)
        })?;
        Ok(JsonHttp { rt: Some(rt), sender: Some(sender), codec: JsonRpc::new(), server: Some(server) })
    }

    fn round_trip(&mut self, v: &VoteData) -> Result<()> {
        let body = Bytes::from(self.codec.encode(v, Envelope::Request)?.to_vec());
        let req = Request::post("/rpc")
            .header(HOST, "127.0.0.1")
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(body))?;
        let (Some(rt), Some(sender)) = (&self.rt, self.sender.as_mut()) else {
            return Err(anyhow!("connection closed"));
        };
        let (status, bytes) = rt.block_on(async {
            let resp = sender.send_request(req).await?;
            let status = resp.status();
            anyhow::Ok((status, resp.into_body().collect().await?.to_bytes()))
        })?;
        ensure!(status == StatusCode::OK, "server answered {status}: {}", String::from_utf8_lossy(&bytes));
        self.codec.decode(&bytes, v, Envelope::Response).context("JSON-RPC reply")
    }
}

impl Drop for JsonHttp {
    fn drop(&mut self) {
        // Closing the client's half ends the server's connection, then its thread.
        self.sender.take();
        self.rt.take();
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}
