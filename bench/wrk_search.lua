-- wrk script: cycles through the request targets in the file named by $WRK_TARGETS (one per
-- line, as `http_bench search --dump-targets FILE` writes them), with the key in $WRK_KEY.
local targets = {}
local next_target = 0

function init(args)
  for line in io.lines(os.getenv("WRK_TARGETS")) do
    targets[#targets + 1] = line
  end
  next_target = math.random(#targets)
end

function request()
  next_target = next_target % #targets + 1
  return wrk.format("GET", targets[next_target], { ["X-Api-Key"] = os.getenv("WRK_KEY") })
end
