/* Dropping privileges the way a server does (tests/test_parity.py):  parity_creds DIR UID
 * As root: keeps its capabilities across the change of user (PR_SET_KEEPCAPS), becomes UID
 * (setresgid, setresuid), makes CAP_SETGID and CAP_SETUID effective again (capset), and
 * changes its group once more with them. Each step prints "label ret errno"; then DIR/after
 * (a folder UID may write) is written. */
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
  int id = atoi(argv[2]);
  CALL("keepcaps", prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
  CALL("setresgid", setresgid(id, id, id));
  CALL("setresuid", setresuid(id, id, id));
  struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  data[0].effective = data[0].permitted = (1u << CAP_SETGID) | (1u << CAP_SETUID);
  CALL("capset", syscall(SYS_capset, &head, data));
  CALL("setresgid-again", setresgid(id + 1, id + 1, id + 1));
  say(1, "ids %d %d\n", (int)getuid(), (int)getgid());
  int fd = CALL("open", open(P("after"), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  CALL("write", write(fd, "after", 5));
  CALL("close", close(fd));
  return 0;
}
