//! The hook against real runc and crun containers with a read-only root.

mod common;

use common::*;

#[test]
fn smoke_runc_prestart() {
    require_root();
    let mut b = Bundle::new("smoke");
    b.script("cat /proc/self/mountinfo; touch /tmp/x && echo WRITE_OK").inject("prestart");
    let run = b.run(Runtime::Runc);
    run.assert_ok();
    let mounts = run.mounts();
    let tmp = mount_at(&mounts, "/tmp").expect("/tmp is mounted");
    assert_eq!(tmp.fstype, "tmpfs");
    assert!(run.stdout().contains("WRITE_OK"));
}
