//! 2,000 concurrent connections, each pinging, against one server: all
//! answered, all counted, none refused. (10,000 is the experiment's job.)

use server::client::Client;

#[test]
fn two_thousand_connections_each_ping() {
    let fds = server::limits::raise_fd_limit();
    assert!(fds >= 4_200, "the test needs 4,200 open files (client + server ends), the limit is {fds}");
    let d = std::env::temp_dir().join(format!("server-test-many-{}", std::process::id()));
    let s = server::start(&d, "127.0.0.1:0", server::limits::Config::default()).unwrap();
    let mut clients: Vec<Client> = (0..2_000).map(|_| Client::connect(s.addr).unwrap()).collect();
    // Every ping is in flight before any answer is read.
    let promises: Vec<_> = clients
        .iter_mut()
        .map(|c| {
            let p = c.ping().unwrap();
            c.flush().unwrap();
            p
        })
        .collect();
    for (c, p) in clients.iter_mut().zip(promises) {
        assert_eq!(c.wait(p).unwrap().len(), 0);
    }
    let mut ctl = Client::connect(s.addr).unwrap();
    let p = ctl.stats().unwrap();
    let stats: serde_json::Value = serde_json::from_str(&ctl.wait_text(p).unwrap()).unwrap();
    assert_eq!(stats["connections"], 2_001);
    drop(clients);
    let summary = s.stop().expect("the server stops cleanly");
    assert_eq!((summary.accepted, summary.refused), (2_001, 0), "{summary}");
    let _ = std::fs::remove_dir_all(&d);
}
