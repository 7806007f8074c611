"""POSIX ACLs set without setfacl, for the tests of folders another user may write into (tests/ is on sys.path:
tests/conftest.py)."""


def access_acl(*, user: int | None = None, group: int | None = None) -> bytes:
    """A POSIX access ACL as Linux stores it (system.posix_acl_access): owner rwx, a named user or group rwx, the
    owning group r-x, mask rwx (so the mode's group bits read rwx), others r-x. What ``setfacl -m u:UID:rwx`` sets."""
    undefined = 0xFFFFFFFF
    entries = [(0x01, 7, undefined)]  # ACL_USER_OBJ
    entries += [] if user is None else [(0x02, 7, user)]  # ACL_USER
    entries += [(0x04, 5, undefined)]  # ACL_GROUP_OBJ
    entries += [] if group is None else [(0x08, 7, group)]  # ACL_GROUP
    entries += [(0x10, 7, undefined), (0x20, 5, undefined)]  # ACL_MASK, ACL_OTHER
    return (2).to_bytes(4, "little") + b"".join(tag.to_bytes(2, "little") + permissions.to_bytes(2, "little")
                                                + who.to_bytes(4, "little") for tag, permissions, who in entries)
