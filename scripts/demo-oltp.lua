-- `make demo`'s workload: sysbench's own oltp_read_write, plus a tally of
-- the transactions that sysbench restarted after an error of its
-- --mysql-ignore-errors list, by error code. sysbench itself prints only
-- the total ("ignored errors"); the demo shows which conflicts they were:
-- 1213 (a certification conflict or a brute-force abort, any provider),
-- 1020 (innodb_snapshot_isolation=ON: the row changed since the snapshot),
-- 1205 (lock wait timeout).
--
-- Each worker thread has its own Lua state, so each prints its own tally
-- when it ends ("restarts <code> <count>"); scripts/demo.sh adds them up.

require("oltp_read_write")

local restarts = {}

local restart_hook = sysbench.hooks.before_restart_event
function sysbench.hooks.before_restart_event(errdesc)
   local code = errdesc.sql_errno or 0
   restarts[code] = (restarts[code] or 0) + 1
   if restart_hook then
      restart_hook(errdesc)
   end
end

local done = thread_done
function thread_done()
   for code, count in pairs(restarts) do
      print(string.format("restarts %d %d", code, count))
   end
   done()
end
