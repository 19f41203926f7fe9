func runPipeWireBench(_ arguments: [String]) { fatalError("not written yet") }
