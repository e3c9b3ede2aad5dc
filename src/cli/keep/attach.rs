//! `tether _attach SOCKET`: a kept server as a stdio server. Run by a
//! command's hub as the kept entry's command, it copies its stdin to the
//! keeper's socket and the socket to its stdout, both ways on one thread
//! (`poll`), until either side ends. The end of stdin is passed on (the
//! keeper then ends this client's requests and closes), and so is the
//! keeper's end (the hub sees its server gone).

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::super::output::{EXIT_OK, EXIT_SERVER};

pub(in crate::cli) fn attach(socket: &Path) -> u8 {
    let stream = match UnixStream::connect(socket) {
        Ok(stream) => stream,
        Err(err) => {
            errln!("the kept-alive session at {} does not answer: {err}", socket.display());
            return EXIT_SERVER;
        }
    };
    match pump(&stream) {
        Ok(()) => EXIT_OK,
        Err(err) => {
            log::debug!("the kept-alive session's connection ended: {err}");
            EXIT_OK
        }
    }
}

/// Copies stdin to `stream` and `stream` to stdout until the stream ends.
fn pump(stream: &UnixStream) -> io::Result<()> {
    let stdin = io::stdin();
    let mut stdout = io::stdout().lock();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut input_open = true;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: if input_open { stdin.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two valid pollfds, for the duration of the call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if fds[1].revents != 0 {
            let read = (&*stream).read(&mut buffer)?;
            if read == 0 {
                return Ok(());
            }
            stdout.write_all(&buffer[..read])?;
            stdout.flush()?;
        }
        if input_open && fds[0].revents != 0 {
            // stdin read raw: no buffer of std's holds back a line.
            // SAFETY: a valid descriptor and a buffer of the length given.
            let read =
                unsafe { libc::read(stdin.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            if read < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if read == 0 {
                input_open = false;
                stream.shutdown(std::net::Shutdown::Write)?;
                continue;
            }
            (&*stream).write_all(&buffer[..read as usize])?;
        }
    }
}
