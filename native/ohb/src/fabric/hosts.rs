//! `--hosts netns`: the client and the servers of a run on separate "hosts". The two hosts are
//! network namespaces joined by a veth pair, and each process also gets its own IPC, PID and mount
//! namespaces with a private `/dev/shm` (the fabric's tests use the same helper, included below):
//! no shared memory, no CMA, no loopback between client and server, so UCX, the fabric and plain
//! sockets all run over TCP on the link, as between two machines.
//!
//! `ohb fabric lat --hosts netns ...` (the outer run) creates the hosts, runs itself again as the
//! client on host b with `--servers-netns <host a>` added, and removes the hosts when it ends. The
//! inner run starts every server (`ohb __serve`, the `ucx_perftest` server) on host a through
//! [`Servers::command`].

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

#[path = "../../../fabric/tests/support/hosts.rs"]
mod support;

pub use support::Hosts;
/// The launcher of a process on a host (also `ohb spark --hosts netns`'s, `spark/hosts.rs`).
pub(crate) use support::command_in;

/// Where the servers of a run live, seen from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Servers {
    /// This host, 127.0.0.1.
    Loopback,
    /// Host a, the network namespace `namespace`; the client runs on host b.
    Netns { namespace: String },
}

impl Servers {
    /// The address servers listen on and clients connect to.
    pub fn ip(&self) -> Ipv4Addr {
        match self {
            Servers::Loopback => Ipv4Addr::LOCALHOST,
            Servers::Netns { .. } => support::host_address(0),
        }
    }

    /// A command that runs `program` where the servers live; on host a UCX uses the link's device.
    pub fn command(&self, program: &Path) -> Command {
        match self {
            Servers::Loopback => Command::new(program),
            Servers::Netns { namespace } => {
                let mut command = support::command_in(namespace, &program.to_string_lossy());
                command.env("UCX_NET_DEVICES", support::host_device(0)).env("UCX_LOG_FILE", "stderr");
                command
            }
        }
    }

    /// The note under the table.
    pub fn note(&self) -> &'static str {
        match self {
            Servers::Loopback => "every server runs in its own process on 127.0.0.1",
            Servers::Netns { .. } => {
                "--hosts netns: client and servers on two hosts (network, IPC, PID and mount namespaces joined by a \
                 veth pair): no shared memory or CMA; UCX and sockets run over TCP on the link"
            }
        }
    }
}

/// The outer run of `--hosts netns`: creates the hosts, runs `ohb <argv> --servers-netns <host a>`
/// as the client on host b (output passed through), and removes the hosts.
pub fn run_on_hosts(exe: &Path, argv: &[String]) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("--hosts netns needs root: it creates network namespaces".into());
    }
    let hosts = Hosts::pair();
    let mut client = support::command_in(hosts.namespace(1), &exe.to_string_lossy());
    client
        .args(argv)
        .args(["--servers-netns", hosts.namespace(0)])
        .env("UCX_NET_DEVICES", support::host_device(1))
        .env("UCX_LOG_FILE", "stderr");
    let status = client.status().map_err(|e| format!("cannot start the client on host b: {e}"))?;
    drop(hosts);
    if status.success() {
        Ok(())
    } else {
        Err(format!("the client run on host b failed ({status})"))
    }
}
