import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if InheritedDescriptors.startsDaemon(arguments) {
    InheritedDescriptors.closeAll()
}
exit(CommandLineTool.run(arguments, environment: ProcessInfo.processInfo.environment))
