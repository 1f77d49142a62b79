/* Everything allot's plugins use from Slurm: public + slurmctld internals.
 * slurm_version.h comes first so that the internal headers can be chosen by
 * release (build.rs rejects releases outside the supported list). */
#include "config.h"
#include <slurm/slurm_version.h>
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
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
/* 23.02 moved the plugin interfaces from src/common and src/slurmctld to src/interfaces. */
#include "src/interfaces/preempt.h"
#else
#include "src/slurmctld/preempt.h"
#endif
#include "src/slurmctld/job_scheduler.h"
