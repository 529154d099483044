# frozen_string_literal: true

module Onceonly
  module Replay
    # The report as a table, like `onceonly replay` prints it.
    module Table
      module_function

      def render(report)
        lines = [format("%-34s %-22s %9s %7s %8s %-3s %-14s %s", "scenario", "kind", "allowed", "naive", "guarded",
                        "rec", "states", "verdict")]
        report["entries"].group_by { |e| [e["number"], e["title"]] }.each do |(number, title), entries|
          entries.each_with_index do |e, i|
            label = i.zero? ? "#{number}  #{title}" : ""
            a = e["allowed"]
            allowed = e["verdict"] == "n/a" ? "n/a" : [a["min"], a["max"]].uniq.join("-") + (a["counted"] == "live" ? " live" : "")
            states = e["records"]["states"].map { |s, n| "#{n} #{s}" }.join(",")
            naive = e["verdict"] == "n/a" ? "-" : e["naive"]["total"]
            guarded = e["verdict"] == "n/a" ? "-" : e["guarded"]["total"]
            lines << format("%-34s %-22s %9s %7s %8s %-3s %-14s %s", label, e["kind"], allowed, naive, guarded,
                            e["records"]["count"], states, e["verdict"])
          end
        end
        report["entries"].reject { |e| e["failures"].empty? }.each do |e|
          lines << "FAIL #{e['number']} #{e['title']} [#{e['kind']}]: #{e['failures'].join('; ')}"
        end
        s = report["summary"]
        lines << "#{report['pass'] ? 'PASS' : 'FAIL'}: #{report['pass'] ? 'every guarded count within what its policy allows' : 'a guarded count broke its policy'} " \
                 "(#{s['pass']} pass, #{s['fail']} fail, #{s['not_applicable']} n/a); #{report['processes']} Sidekiq processes, " \
                 "#{report['worker_deaths'].size} killed and replaced; #{report['db']}, #{(report['elapsed_ms'] / 1000.0).round(1)}s, run #{report['run_id']}"
        lines.join("\n")
      end
    end
  end
end
