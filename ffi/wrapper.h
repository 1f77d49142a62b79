/* Everything allot's plugins use from Slurm 22.05: public + slurmctld internals. */
#include "config.h"
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h>
#include "src/slurmctld/slurmctld.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/common/log.h"
#include "src/common/list.h"
#include "src/common/uid.h"
#include "src/common/assoc_mgr.h"
#include "src/slurmctld/preempt.h"
#include "src/slurmctld/job_scheduler.h"
