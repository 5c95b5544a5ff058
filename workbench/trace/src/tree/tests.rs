use super::*;

#[test]
fn generic_arguments_leave_flame_labels() {
    assert_eq!(short("<alloc::vec::Vec<u8>>::with_capacity"), "<alloc::vec::Vec>::with_capacity");
    assert_eq!(short("capnp::message::Builder<A>::new"), "capnp::message::Builder::new");
}
